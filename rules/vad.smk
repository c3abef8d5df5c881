# VAD: TEN-VAD per shard (one worker process per thread), then a merge of the
# per-file statistics of every shard.


rule vad:
    input:
        shard=shard_file,
    output:
        segments=f"{RESULTS}/{{ds}}/vad/{{shard}}.segments.jsonl",
        stats=f"{RESULTS}/{{ds}}/vad/{{shard}}.stats.jsonl",
        rejects=f"{RESULTS}/{{ds}}/vad/{{shard}}.rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/vad/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/vad/{{shard}}.tsv"
    conda:
        job_env("vad run")
    envmodules:
        job_module("vad run"),
    threads: config["vad"]["threads"]
    resources:
        mem_mb=shard_memory(
            "vad run", dataset_manifest, block_seconds=config["vad"]["block_seconds"]
        ),
        runtime=scaled(20, 40, of="shard"),
    params:
        cmd=job_cmd("vad run"),
        p=job_params("vad run"),
        resume=f"{RESULTS}/{{ds}}/vad/.partial/{{shard}}.jsonl",
    shell:
        job_shell("vad run")


rule vad_merge:
    input:
        stats=per_shard(f"{RESULTS}/{{ds}}/vad/{{shard}}.stats.jsonl"),
        rejects=per_shard(f"{RESULTS}/{{ds}}/vad/{{shard}}.rejects.jsonl"),
        segments=per_shard(f"{RESULTS}/{{ds}}/vad/{{shard}}.segments.jsonl"),
    output:
        csv=f"{RESULTS}/{{ds}}/vad/stats.csv",
        summary=f"{RESULTS}/{{ds}}/vad/summary.json",
    log:
        f"{RESULTS}/{{ds}}/logs/vad_merge.log",
    conda:
        job_env("vad merge")
    envmodules:
        job_module("vad merge"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cmd=job_cmd("vad merge"),
    shell:
        job_shell("vad merge")
