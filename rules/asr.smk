# ASR: NeMo transcripts per shard of VAD segments (diarized: rules/diarize.smk), then the merged manifest.


rule asr:
    input:
        segments=asr_segments,
        model=asr_model_file,
    output:
        transcripts=f"{RESULTS}/{{ds}}/asr/{{shard}}.jsonl",
        rejects=f"{RESULTS}/{{ds}}/asr/{{shard}}.rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/asr/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/asr/{{shard}}.tsv"
    conda:
        "../envs/asr.yaml"
    envmodules:
        "speechprep/asr",
    threads: config["asr"]["threads"]
    resources:
        mem_mb=shard_memory(
            "asr",
            "segments",
            [config["asr"]["model"]],
            batch_seconds=config["asr"]["cpu_batch_seconds"],
        ),
        runtime=scaled(30, 60, of="segments"),
    params:
        cmd=speechprep("asr"),
        p=job_params("asr run"),
        resume=f"{RESULTS}/{{ds}}/asr/.partial/{{shard}}.jsonl",
    shell:
        "{params.cmd} asr run --segments {input.segments:q} --params {params.p:q} --threads {threads}"
        " --resume {params.resume:q} --out {output.transcripts:q} --rejects {output.rejects:q}"
        " > {log:q} 2>&1"


rule asr_merge:
    input:
        shards=per_shard(f"{RESULTS}/{{ds}}/asr/{{shard}}.jsonl"),
        rejects=per_shard(f"{RESULTS}/{{ds}}/asr/{{shard}}.rejects.jsonl"),
    output:
        manifest=f"{RESULTS}/{{ds}}/asr/manifest.jsonl",
        summary=f"{RESULTS}/{{ds}}/asr/summary.json",
    log:
        f"{RESULTS}/{{ds}}/logs/asr_merge.log",
    conda:
        "../envs/asr.yaml"
    envmodules:
        "speechprep/asr",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cmd=speechprep("asr"),
    shell:
        "{params.cmd} asr merge --manifest {output.manifest:q} --summary {output.summary:q}"
        " --shards {input.shards:q} --rejects {input.rejects:q} > {log:q} 2>&1"
