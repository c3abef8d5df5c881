"""Shared by the diarization tests: Resemblyzer's encoder (loaded once), the parameters."""

import warnings

import pytest

from speechprep.diarize.params import DiarizeParams
from tests.support import params as config_params

warnings.simplefilter("ignore")


@pytest.fixture(scope="session")
def model():
    """Resemblyzer's VoiceEncoder, as the pipeline's encoder class loads it (CPU, one thread)."""
    import torch

    from speechprep.encoders import ResemblyzerEncoder

    torch.set_num_threads(1)
    return ResemblyzerEncoder("cpu", 1).model


@pytest.fixture(scope="session")
def params():
    return config_params(DiarizeParams, device="cpu")
