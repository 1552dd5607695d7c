"""Pure statistics helpers for the analyses (f): proportions, stratified means, clustered intervals,
agreement and reliability, text similarity.

Every function is deterministic: randomness only through an explicit `seed` or numpy Generator argument.
Each module has a `VERSION`; a result should record the version of the module whose rule produced it.
"""

from agent_factory.evaluators.stats.agreement import (
    ADMISSION_THRESHOLD,
    Admission,
    Kappa,
    admit,
    cohen_kappa,
    fleiss_kappa,
    rating_counts,
    two_decimals,
)
from agent_factory.evaluators.stats.alpha import Alpha, krippendorff_alpha
from agent_factory.evaluators.stats.association import MeanDifference, cluster_mean_difference
from agent_factory.evaluators.stats.auc import AUC, cluster_auc, rank_auc
from agent_factory.evaluators.stats.clustered import (
    ClusterRatio,
    cluster_bootstrap_ci,
    cluster_proportion_ci,
    cluster_ratio_se,
    cluster_two_proportion_z,
    mean,
)
from agent_factory.evaluators.stats.detection import Detection, detection_rates
from agent_factory.evaluators.stats.estimate import Estimate
from agent_factory.evaluators.stats.ppi import PPIEstimate, judge_rate, ppi_rate
from agent_factory.evaluators.stats.proportions import ProportionTest, proportion_ci, two_proportion_z
from agent_factory.evaluators.stats.reliability import (
    ICCKind,
    TwoWayAnova,
    VarianceComponents,
    icc,
    two_way_anova,
    variance_components,
)
from agent_factory.evaluators.stats.stratified import StratifiedEstimate, StratumSummary, stratified_mean
from agent_factory.evaluators.stats.text import bigram_jaccard, char_bigrams, normalize_text

__all__ = [
    "ADMISSION_THRESHOLD",
    "AUC",
    "Admission",
    "Alpha",
    "ClusterRatio",
    "Detection",
    "Estimate",
    "ICCKind",
    "Kappa",
    "MeanDifference",
    "PPIEstimate",
    "ProportionTest",
    "StratifiedEstimate",
    "StratumSummary",
    "TwoWayAnova",
    "VarianceComponents",
    "admit",
    "bigram_jaccard",
    "char_bigrams",
    "cluster_auc",
    "cluster_bootstrap_ci",
    "cluster_mean_difference",
    "cluster_proportion_ci",
    "cluster_ratio_se",
    "cluster_two_proportion_z",
    "cohen_kappa",
    "detection_rates",
    "fleiss_kappa",
    "icc",
    "judge_rate",
    "krippendorff_alpha",
    "mean",
    "normalize_text",
    "ppi_rate",
    "proportion_ci",
    "rank_auc",
    "rating_counts",
    "stratified_mean",
    "two_decimals",
    "two_proportion_z",
    "two_way_anova",
    "variance_components",
]
