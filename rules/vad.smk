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
        "../envs/vad.yaml"
    envmodules:
        "speechprep/vad",
    threads: config["vad"]["threads"]
    resources:
        mem_mb=shard_memory("vad", dataset_manifest, block_seconds=config["vad"]["block_seconds"]),
        runtime=scaled(20, 40, of="shard"),
    params:
        cmd=speechprep("vad"),
        p=job_params("vad run"),
        resume=f"{RESULTS}/{{ds}}/vad/.partial/{{shard}}.jsonl",
    shell:
        "{params.cmd} vad run --shard {input.shard:q} --params {params.p:q}"
        " --threads {threads} --resume {params.resume:q} --segments {output.segments:q}"
        " --stats {output.stats:q} --rejects {output.rejects:q} > {log:q} 2>&1"


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
        "../envs/vad.yaml"
    envmodules:
        "speechprep/vad",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cmd=speechprep("vad"),
    shell:
        "{params.cmd} vad merge --csv {output.csv:q} --summary {output.summary:q}"
        " --stats {input.stats:q} --rejects {input.rejects:q} --segments {input.segments:q} > {log:q} 2>&1"
