"""H: trace formats -> the normalized four-layer model. Imports nothing else of this project."""

from agent_factory.adapters.base import Adapter, AdapterItem, Quarantine, adapter_names, detect, get_adapter
from agent_factory.adapters.model import (
    Conversation,
    DeliveryState,
    Engagement,
    EvidencePointer,
    OutcomeEvent,
    Span,
    SpanKind,
    TokenUsage,
    Turn,
)

__all__ = [
    "Adapter", "AdapterItem", "Conversation", "DeliveryState", "Engagement", "EvidencePointer", "OutcomeEvent",
    "Quarantine", "Span", "SpanKind", "TokenUsage", "Turn", "adapter_names", "detect", "get_adapter",
]
