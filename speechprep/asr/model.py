"""The ASR model: any NeMo ASR class from a local ``.nemo`` file (checked before NeMo
restores it) or a pretrained name; what output lines record about it; its sample rate;
the prompt of a multitask (Canary) model; the character-TDT decoding repair."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..core.batching import is_oom
from ..errors import ModelFileError, UsageError, describe
from ..io.modelfiles import check_nemo_file, is_local_model, sha256_cached


def model_identity(spec: str, hash_cache: str | None = None) -> dict[str, str]:
    """What each output line records about the model: path + sha256 (cached in ``hash_cache``), or the name."""
    if is_local_model(spec):
        path = os.path.abspath(spec)
        if not os.path.isfile(path):
            raise ModelFileError(f"asr.model: no such file {path!r}")
        return {"asr_model": path, "asr_model_sha256": sha256_cached(path, hash_cache)}
    return {"asr_model": spec}


def load_model(spec: str, device: str):
    """Any NeMo ASR model class (CTC, RNNT/TDT, hybrid, multitask AED) from a local .nemo or a
    pretrained name. A local file that is missing or broken raises :class:`ModelFileError`."""
    local = is_local_model(spec)
    if local:
        path = os.path.abspath(spec)
        check_nemo_file(path)
    import torch
    from nemo.collections.asr.models import ASRModel

    if local:
        try:
            model = ASRModel.restore_from(path, map_location=torch.device(device))
        except Exception as e:
            if is_oom(e):
                raise
            raise ModelFileError(
                f"asr.model: {path} is not a valid .nemo file (NeMo could not restore it: {describe(e)})"
            ) from None
    else:
        try:
            model = ASRModel.from_pretrained(spec, map_location=torch.device(device))
        except Exception as e:  # noqa: BLE001 (whatever the hub client raises offline)
            raise UsageError(
                f"asr.model {spec!r} is not a local file, so it was taken for a pretrained model name, "
                f"and fetching it failed ({describe(e)}). Pretrained names need network access to the "
                "model hub; offline, download the .nemo file where you have access and set asr.model "
                "to its path."
            ) from None
    model.eval()
    repair_char_tdt_decoding(model)
    return model


def repair_char_tdt_decoding(model) -> bool:
    """Make a character-vocabulary TDT model's decoding keep its whole vocabulary.

    NeMo 3.0's character RNNT decoding turns ids into characters keeping only ids
    below ``blank_id - num_extra_outputs`` (``RNNTDecoding.decode_ids_to_tokens``).
    That is right for multi-blank RNNT, whose extra blanks sit between the
    vocabulary and the blank, but a TDT model's blank id already is the
    vocabulary's length and its extra outputs are durations: the last
    ``len(durations)`` characters of the vocabulary (``v w x y z '`` in NeMo's
    English character set) vanish from every transcript, and word timestamps
    fail with an IndexError on any segment holding one of them. The decoding
    object is corrected (its filter subtracts nothing); True if it was."""
    decoding = getattr(model, "decoding", None)
    if not (
        type(decoding).__name__ == "RNNTDecoding"
        and getattr(decoding, "_is_tdt", False)
        and getattr(decoding, "num_extra_outputs", 0)
        and getattr(decoding, "blank_id", None) == len(getattr(decoding, "labels_map", ()))
    ):
        return False
    decoding.num_extra_outputs = 0
    return True


def model_sample_rate(model) -> int:
    cfg = model.cfg
    for getter in (lambda: cfg.preprocessor.sample_rate, lambda: cfg.sample_rate):
        try:
            return int(getter())
        except Exception:  # noqa: BLE001 (configs differ between model classes)
            continue
    return 16000


def multitask_prompt(model) -> Callable[[str], dict[str, str]] | None:
    """``language -> prompt`` for a multitask (AED, Canary) model's ``transcribe()``; None for
    other models, which take no prompt.

    The prompt asks for transcription (task asr, source = target language) with
    punctuation, in the slots the model's prompt format has: canary-1 has all
    four, canary-2 has no task slot (its other slots come from the model's
    prompt defaults). A language the model has no token for raises ValueError.
    """
    from nemo.collections.asr.models import EncDecMultiTaskModel
    from nemo.collections.common.tokenizers.canary_tokenizer import CANARY_SPECIAL_TOKENIZER

    if not isinstance(model, EncDecMultiTaskModel):
        return None
    slots = model.prompt.get_slots("user")
    special = getattr(model.tokenizer, "special_tokens", None)
    languages = [x for x in getattr(model.tokenizer, "langs", []) if x != CANARY_SPECIAL_TOKENIZER]

    def prompt(language: str) -> dict[str, str]:
        if special is not None and f"<|{language}|>" not in special:
            raise ValueError(
                f"language {language!r} is not one of the model's languages ({', '.join(languages)}); "
                "set the segment's language, the dataset's language or asr.language"
            )
        values = {"task": "asr", "source_lang": language, "target_lang": language, "pnc": "yes"}
        return {k: v for k, v in values.items() if k in slots}

    return prompt
