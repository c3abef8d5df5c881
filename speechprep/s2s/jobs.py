"""The S2S stage's jobs (:mod:`speechprep.core.jobs`)."""

from ..core.jobs import Memory, job, shard_files, torch_threads
from ..errors import ModelFileError, SpeechprepError, describe
from .params import S2sExportParams, S2sParams


@job(
    "s2s run",
    "s2s",
    S2sParams,
    inputs="segments",
    outputs="out wav-dir rejects",
    options="threads? resume export?",
    memory=Memory(650, batch_mb_per_s=4.0, shard_mb_per_s=0.02),
)
def run(f, p):
    """HuBERT units and unit HiFi-GAN resynthesis of one shard."""
    from . import stage

    torch_threads(f.threads)
    stage.run(shard_files(f, {"wav": f.wav_dir}, p.layout), p, f.threads, export=f.export)


@job("s2s export", "s2s", S2sExportParams, inputs="checkpoint", outputs="out", options="threads?")
def export(f, p):
    """Export a HuBERT up to a layer for ONNX Runtime, checked against PyTorch (s2s.runtime)."""
    from . import runtime

    torch_threads(f.threads)
    runtime.build_export(f.checkpoint, p.layer, f.out, threads=f.threads)


@job("s2s inspect", "s2s", options="checkpoint= write-modern?")
def inspect(f, p):
    """What is legacy about a fairseq checkpoint (--write-modern: a copy plain fairseq loads)."""
    from . import fairseq_legacy as legacy

    try:
        rep = (
            legacy.write_modern(f.checkpoint, f.write_modern)
            if f.write_modern
            else legacy.inspect_checkpoint(f.checkpoint)
        )
    except SpeechprepError:
        raise
    except Exception as e:  # noqa: BLE001 (fairseq failing to build it, an unwritable OUT: one line)
        raise ModelFileError(f"{f.checkpoint}: {describe(e)}") from None
    print("\n".join(rep.lines()))
    print("legacy: " + ("yes" if rep.legacy else "no"))
    if f.write_modern:
        print(f"modern copy written to {f.write_modern}")
