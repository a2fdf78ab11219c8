"""zlbench: a declarative, vendor-neutral orchestrator for operator benchmark corpora."""

__version__ = "0.1.0"
