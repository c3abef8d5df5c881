"""Memory requests of the shard jobs: a function of the shard's content and the models."""

import os

from speechprep.core.config import BatchBudget
from speechprep.io.jsonio import write_jsonl
from speechprep.jobs import JOBS
from speechprep.workflow.resources import (
    CUDA_HOST_MB,
    HUB_MODEL_MB,
    JOB_MB,
    RESTORE_COPIES,
    ROUND_MB,
    ShardContent,
    memory_mb,
    shard_content,
)

ASR = JOBS["asr run"].memory
VAD = JOBS["vad run"].memory


def cpu(seconds):
    return BatchBudget(cpu_seconds=seconds, seconds_per_gib=60.0, gpu_reserve_gib=1.0, max_seconds=3600.0)


def segments(n, seconds):
    return [{"id": f"s{k}", "audio_filepath": "/a.wav", "offset": 0.0, "duration": seconds} for k in range(n)]


def test_shard_content_is_read_from_the_file_and_reread_when_it_changes(tmp_path):
    p = tmp_path / "shard-0000.jsonl"
    assert shard_content(p) == ShardContent()  # not there yet: the fixed part alone
    write_jsonl(p, [*segments(3, 2.0), {"id": "f", "duration": 9.5, "channels": 2, "sample_rate": 48000}])
    c = shard_content(p)
    assert (c.lines, c.seconds, c.longest, c.max_channel_rate) == (4, 15.5, 9.5, 96000)
    write_jsonl(p, segments(1, 1.0))
    os.utime(p, ns=(1, 10**9))  # a coarse clock: the new version still differs in size and mtime
    assert shard_content(p).lines == 1


def test_request_grows_with_what_the_job_holds(tmp_path):
    small, many = ShardContent(10, 50.0, 8.0), ShardContent(10_000, 50_000.0, 8.0)
    base = memory_mb(ASR, small, batch=cpu(60))
    assert base >= JOB_MB + ASR.fixed_mb and base % ROUND_MB == 0
    assert memory_mb(ASR, many, batch=cpu(60)) > base  # the shard's lines and results
    assert memory_mb(ASR, ShardContent(1, 600.0, 600.0), batch=cpu(60)) > base  # longer than the budget
    assert memory_mb(ASR, small, batch=cpu(600)) > base  # a bigger batch
    model = tmp_path / "m.nemo"
    with open(model, "wb") as f:
        f.truncate(200_000_000)  # a 200 MB model file (sparse)
    # the model once, and once more while it is restored where that is more than the batch
    batch = ASR.batch_mb_per_s * 60
    with_model = memory_mb(ASR, small, [str(model)], batch=cpu(60))
    assert with_model - base >= 200 + (RESTORE_COPIES - 1) * 200 - batch - ROUND_MB and with_model > base
    large = tmp_path / "large.nemo"
    with open(large, "wb") as f:
        f.truncate(2_474_000_000)  # parakeet-tdt-0.6b's size: its restore's peak, 2 x 2,474 MB + 519
    want = JOB_MB + ASR.fixed_mb + RESTORE_COPIES * 2474 + ASR.shard_mb_per_s * 50.0
    assert want <= memory_mb(ASR, small, [str(large)], batch=cpu(60)) < want + ROUND_MB
    # a model by hub name has no size yet; a local model not built yet counts nothing until it is
    hub = memory_mb(ASR, small, ["nvidia/canary-1b-flash"], batch=cpu(60))
    assert hub - base >= RESTORE_COPIES * HUB_MODEL_MB - batch - ROUND_MB
    assert memory_mb(ASR, small, [str(tmp_path / "later.nemo")], batch=cpu(60)) == base
    # shards of similar size ask for the same (a job array gets its first task's request)
    assert memory_mb(ASR, ShardContent(900, 3500.0, 29.0), batch=cpu(120)) == memory_mb(
        ASR, ShardContent(1100, 3700.0, 30.0), batch=cpu(120)
    )


def test_request_follows_the_device_the_batch_runs_on():
    """On the CPU a batch's activations are the job's memory; on a GPU they are not, but the
    CUDA context and the batch's audio are (up to the GPU budget's ``max_seconds``); ``auto``
    may land on either: the larger."""
    shard, batch = ShardContent(10, 50.0, 8.0), cpu(120)
    on_cpu = memory_mb(ASR, shard, batch=batch, device="cpu")
    on_gpu = memory_mb(ASR, shard, batch=batch, device="cuda:0")
    assert on_gpu == memory_mb(ASR, shard, batch=batch, device="cuda")
    assert on_gpu - memory_mb(ASR, shard, device="cpu") >= CUDA_HOST_MB - ROUND_MB
    assert memory_mb(ASR, shard, batch=batch, device="auto") == max(on_cpu, on_gpu)
    # a bigger CPU batch grows the CPU request only; a bigger GPU cap the GPU request only
    assert memory_mb(ASR, shard, batch=cpu(600), device="cpu") > on_cpu
    assert memory_mb(ASR, shard, batch=cpu(600), device="cuda") == on_gpu
    bigger = BatchBudget(cpu_seconds=120, seconds_per_gib=60.0, gpu_reserve_gib=1.0, max_seconds=36000.0)
    assert memory_mb(ASR, shard, batch=bigger, device="cuda") > on_gpu
    assert memory_mb(ASR, shard, batch=bigger, device="cpu") == on_cpu


def test_vad_request_follows_workers_channels_and_rate():
    mono = ShardContent(5, 3000.0, 600.0, 16000)
    array = ShardContent(5, 3000.0, 600.0, 128 * 16000)  # one 128-channel recording among them
    one = memory_mb(VAD, mono, threads=1, block_seconds=60)
    assert memory_mb(VAD, mono, threads=4, block_seconds=60) > one
    # a 60 s block of 128 channels in float32 is 491 MB, held three times
    assert memory_mb(VAD, array, threads=1, block_seconds=60) - one >= 3 * 491 - ROUND_MB
    short = ShardContent(5, 50.0, 10.0, 128 * 16000)  # files shorter than a block: a file's worth
    assert memory_mb(VAD, short, threads=1, block_seconds=60) < memory_mb(VAD, array, threads=1, block_seconds=60)
