# S2S: HuBERT units per shard of VAD segments, and unit HiFi-GAN resynthesis;
# the HuBERT exported once for ONNX Runtime (s2s.runtime) and checked.


rule s2s_export:
    input:
        checkpoint=config["s2s"]["hubert"],
        env=str(REPO / "envs" / "s2s.yaml"),  # another torch or onnxruntime: built again
    output:
        out=S2S_EXPORT,
        meta=f"{S2S_EXPORT}.json",
    log:
        f"{RESULTS}/{ALL}/logs/s2s_export.log",
    conda:
        job_env("s2s export")
    envmodules:
        job_module("s2s export"),
    threads: config["s2s"]["threads"]
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        cmd=job_cmd("s2s export"),
        p=job_params("s2s export"),
    shell:
        job_shell("s2s export")


rule s2s:
    input:
        segments=lambda wc: PLAN.s2s_segments(wc.ds, wc.shard),
        models=lambda wc: PLAN.s2s_model_files(),
        export=lambda wc: PLAN.s2s_export_files(),
    output:
        out=f"{RESULTS}/{{ds}}/s2s/{{shard}}.units.jsonl",
        rejects=f"{RESULTS}/{{ds}}/s2s/{{shard}}.rejects.jsonl",
        wav_dir=directory(f"{RESULTS}/{{ds}}/s2s/{{shard}}"),
    log:
        f"{RESULTS}/{{ds}}/logs/s2s/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/s2s/{{shard}}.tsv"
    conda:
        job_env("s2s run")
    envmodules:
        job_module("s2s run"),
    threads: config["s2s"]["threads"]
    resources:
        mem_mb=shard_memory(
            "s2s run",
            "segments",
            PLAN.s2s_model_files(),
            batch=config["s2s"]["batch"],
            device=config["s2s"]["device"],
        ),
        runtime=scaled(30, 120, of="segments"),
    params:
        cmd=job_cmd("s2s run"),
        p=job_params("s2s run"),
        resume=f"{RESULTS}/{{ds}}/s2s/.partial/{{shard}}.jsonl",
        export=lambda wc, input: flag_list("export", input.export),
    shell:
        job_shell("s2s run")
