"""In-container kit shared by all scalebench training images.

Light on purpose (numpy + jsonschema): it is imported inside every framework image and by the
orchestrator, which validates results against the same contract schema.
"""
from .contract import CONTRACT_VERSION, ContractError, load_cell_spec, validate_contract

__all__ = ["CONTRACT_VERSION", "ContractError", "load_cell_spec", "validate_contract"]
