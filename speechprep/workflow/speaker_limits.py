"""What the built-in speaker model cannot do, said before the run: a dataset of telephone-band
audio whose speakers are clustered with Resemblyzer is warned about (:func:`narrowband_warnings`).

Resemblyzer is a 2019 wideband d-vector. Through 8 kHz telephone audio it draws voices
together and spreads one voice's clips apart, so a voice of many one-clip files splits over
several speaker ids whatever the threshold (docs/stages/speakers.md, "Speakers on real voices"). The
check reads a sample of each dataset's files: their sample rate from the header, and, where
the rate is wideband, the bandwidth of a few seconds of their audio (8 kHz speech upsampled
to 16 kHz reads about 4 kHz). Standard library, numpy and soundfile: the Snakefile runs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..core.spectral import bandwidth_hz
from ..io.inventory import walk_audio

SAMPLE_FILES = 12  # files read per dataset
READ_SECONDS = 8.0  # audio read from each wideband-rate file for its bandwidth (from 10 % into it)
MANIFEST_LINES = 2000  # manifest lines read for the sample and for `speaker`
# the figures the warning gives (docs/stages/speakers.md, "Speakers on real voices": 542 real telephone
# prompts of five professional voices, a file each, average linkage at the default 0.18)
FIGURES = "inverse purity 0.69 at purity 0.97: one voice split over several speaker ids"


def _sample(paths: list[str]) -> list[str]:
    step = max(1, len(paths) // SAMPLE_FILES)
    return paths[::step][:SAMPLE_FILES]


def _dataset_files(ds: dict[str, Any], extensions) -> tuple[list[str], bool]:
    """A sample of the dataset's audio files, and whether every manifest line read names its speaker."""
    if ds.get("audio_dir"):
        root = Path(ds["audio_dir"])
        if not root.is_dir():  # ingest says what is wrong with it
            return [], False
        rels = sorted(rel for rel, _ in walk_audio(str(root), ds.get("extensions", extensions)))
        return [str(root / r) for r in _sample(rels)], False
    lines = []
    if not ds.get("manifest"):
        return [], False
    try:
        with open(ds["manifest"], encoding="utf-8-sig", errors="replace") as f:
            for n, text in enumerate(f):
                if n >= MANIFEST_LINES:
                    break
                try:
                    lines.append(json.loads(text))
                except ValueError:
                    continue
    except OSError:
        return [], False
    lines = [x for x in lines if isinstance(x, dict) and x.get("audio_filepath")]
    given = bool(lines) and all(x.get("speaker") for x in lines)
    return _sample([str(x["audio_filepath"]) for x in lines]), given


def file_band(path: str, narrowband_hz: float, floor_db: float) -> float | None:
    """The file's bandwidth in Hz: half its sample rate when that is under ``narrowband_hz``
    times two, else measured on a few seconds of it; None when it cannot be read."""
    import soundfile as sf

    try:
        info = sf.info(path)
        if info.samplerate < 2 * narrowband_hz:
            return info.samplerate / 2
        start, n = int(max(info.frames, 0) * 0.1), int(READ_SECONDS * info.samplerate)
        x, rate = sf.read(path, start=start, frames=n, dtype="float32", always_2d=True)
    except Exception:  # noqa: BLE001 (any unreadable file: ingest says what is wrong with it)
        return None
    x = x.mean(axis=1)
    return bandwidth_hz(x, rate, floor_db) if np.isfinite(x).all() else None  # NaN audio: ingest's to report


def narrowband_warnings(config: dict[str, Any]) -> list[str]:
    """One line per dataset whose speakers curation or diarization will cluster with the built-in
    speaker model, whose sampled files are mostly telephone band and whose manifest does not name the
    speakers: what to expect, and the two ways out."""
    from ..diarize.params import runs_for

    sp, stages = config.get("speakers") or {}, config.get("stages") or []
    if sp.get("model") != "resemblyzer":
        return []
    narrow_hz = float((config.get("diarize") or {}).get("narrowband_hz", 5000))
    floor_db = float((config.get("curate") or {}).get("bandwidth_floor_db", 50))
    extensions = (config.get("ingest") or {}).get("extensions", [])
    lines = []
    for name, ds in (config.get("datasets") or {}).items():
        if not isinstance(ds, dict) or not ("curate" in stages or runs_for(config, name)):
            continue
        try:  # said before the config is validated: a dataset it cannot read is ingest's to report
            files, given = _dataset_files(ds, extensions)
        except (OSError, TypeError, ValueError, KeyError):
            continue
        bands = [b for b in (file_band(f, narrow_hz, floor_db) for f in files) if b is not None]
        narrow = sum(b < narrow_hz for b in bands)
        if given or not bands or narrow * 2 < len(bands):
            continue
        lines.append(
            f"WARNING: dataset {name}: {narrow} of {len(bands)} sampled files are telephone band (under "
            f"{narrow_hz:.0f} Hz), and its speakers are clustered with the built-in speaker model "
            f"(speakers.model: resemblyzer, a wideband d-vector). On real telephone prompts, a file each, it "
            f'gives {FIGURES} (docs/stages/speakers.md, "Speakers on real voices"). Two ways out: a speaker model '
            f"trained on telephone speech (speakers.model: a TitaNet .nemo, a WeSpeaker or 3D-Speaker .onnx, "
            f'with its own thresholds: docs/stages/speakers.md, "Speaker models"), or `speaker` on every line '
            f"of the input manifest (taken as given)."
        )
    return lines
