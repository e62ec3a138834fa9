"""Benchmark and fleet configs: the YAML files of include/configs validated into typed objects,
one module per file (fleet, stacks, benchmark, alerts, shifts) plus what they share (common) and
the loader of them all (Configs).

Unknown keys are errors. A bad file fails with the file name, the field path, the bad value
and what was expected. Profiles may change sizes only; the code path stays the same.
"""
from scalebench.core.config.alerts import AlertConfig, load_alerts
from scalebench.core.config.benchmark import (NOT_RESULT_FIELDS, AccuracyTarget, Benchmark, Dataset, Estimate, LrPolicy,
                                              ReferenceAccuracy, Resolved, Sizes, StepPlan, load_benchmark)
from scalebench.core.config.common import (ALERTS_FILE, DEFAULT_PRECISION, IMAGE_REF, IMAGE_TAG, MIN_TIMED_STEPS, PROFILE_STEPS,
                                           PROFILES, SHIFTS_FILE, STACKS_FILE, ConfigError, Strict, image_repository,
                                           with_tag)
from scalebench.core.config.fleet import Fleet, Host, HostProbe, load_fleet
from scalebench.core.config.loader import Configs
from scalebench.core.config.shifts import AcknowledgedShift, AcknowledgedShifts, load_acknowledged_shifts
from scalebench.core.config.stacks import Archive, DatasetSource, SplitSizes, Stack, StackPrecision, Stacks, load_stacks

__all__ = ["ALERTS_FILE", "DEFAULT_PRECISION", "IMAGE_REF", "IMAGE_TAG", "MIN_TIMED_STEPS", "PROFILE_STEPS", "NOT_RESULT_FIELDS",
           "PROFILES", "SHIFTS_FILE", "STACKS_FILE", "AccuracyTarget", "AcknowledgedShift", "AcknowledgedShifts",
           "AlertConfig", "Archive", "Benchmark", "ConfigError", "Configs", "Dataset", "DatasetSource", "Estimate",
           "Fleet", "Host", "HostProbe", "LrPolicy", "ReferenceAccuracy", "Resolved", "Sizes", "SplitSizes", "Stack",
           "StackPrecision", "Stacks", "StepPlan", "Strict", "image_repository", "load_acknowledged_shifts",
           "load_alerts", "load_benchmark", "load_fleet", "load_stacks", "with_tag"]
