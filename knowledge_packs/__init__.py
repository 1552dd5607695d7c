"""K: knowledge packs, the domain knowledge an evaluator carries (docs/method.md section 5).

`load_pack("business_analysis")` returns a validated, frozen `KnowledgePack`; `list_packs()` names the packs
that can be loaded; `default_pack_path()` is the target of this project's own entry point.
"""

from agent_factory.knowledge_packs.loader import (
    GROUP,
    default_pack_path,
    list_packs,
    load_pack,
    pack_entry_points,
    resolve_pack,
)
from agent_factory.knowledge_packs.model import (
    REAL_SEGMENT,
    Baselines,
    CoveragePolicy,
    KnowledgePack,
    Lexicon,
    LexiconPattern,
    ModeBaseline,
    SegmentRule,
    Thresholds,
    compile_pattern,
)

__all__ = [
    "GROUP",
    "REAL_SEGMENT",
    "Baselines",
    "CoveragePolicy",
    "KnowledgePack",
    "Lexicon",
    "LexiconPattern",
    "ModeBaseline",
    "SegmentRule",
    "Thresholds",
    "compile_pattern",
    "default_pack_path",
    "list_packs",
    "load_pack",
    "pack_entry_points",
    "resolve_pack",
]
