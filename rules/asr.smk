# ASR: NeMo transcripts per shard of VAD segments (diarized: rules/diarize.smk), then the merged manifest. A
# transcribed dataset (text: given or verify) keeps its given text (verify: checked by
# the model); where a shard holds long recordings with their text, asr_align first cuts
# them into utterances, which the ASR job reads with the shard's other utterances.


rule asr_align:
    input:
        segments=f"{RESULTS}/{{ds}}/vad/{{shard}}.segments.jsonl",
        model=lambda wc: PLAN.asr_model_files(),
        grammars=lambda wc: PLAN.grammar_dirs(),
    output:
        out=f"{RESULTS}/{{ds}}/asr/{{shard}}.utterances.jsonl",
        rejects=f"{RESULTS}/{{ds}}/asr/{{shard}}.align_rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/asr_align/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/asr_align/{{shard}}.tsv"
    conda:
        job_env("asr align")
    envmodules:
        job_module("asr align"),
    threads: config["asr"]["threads"]
    resources:
        mem_mb=shard_memory(
            "asr align", "segments", [config["asr"]["model"]], device=config["asr"]["device"]
        ),
        runtime=audio_minutes(30, 30, of="segments"),
    params:
        cmd=job_cmd("asr align"),
        p=job_params("asr align"),
        resume=f"{RESULTS}/{{ds}}/asr/.partial/{{shard}}.align.jsonl",
        grammars=lambda wc, input: flag_list("grammars", input.grammars),
    shell:
        job_shell("asr align")


rule asr:
    input:
        segments=lambda wc: PLAN.asr_items(wc.ds, wc.shard),
        model=lambda wc: PLAN.asr_job_model(wc.ds),
        grammars=lambda wc: PLAN.asr_job_grammars(wc.ds),
        align_rejects=lambda wc: PLAN.asr_align_rejects(wc.ds, wc.shard),
    output:
        out=f"{RESULTS}/{{ds}}/asr/{{shard}}.jsonl",
        rejects=f"{RESULTS}/{{ds}}/asr/{{shard}}.rejects.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/asr/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/asr/{{shard}}.tsv"
    conda:
        job_env("asr run")
    envmodules:
        job_module("asr run"),
    threads: config["asr"]["threads"]
    resources:
        mem_mb=shard_memory(
            "asr run",
            "segments",
            [config["asr"]["model"]],
            batch=config["asr"]["batch"],
            device=config["asr"]["device"],
        ),
        runtime=scaled(30, 60, of="segments"),
    params:
        cmd=job_cmd("asr run"),
        job=lambda wc: PLAN.asr_job(wc.ds),
        p=lambda wc: job_params(f"asr {PLAN.asr_job(wc.ds)}")(wc),
        resume=f"{RESULTS}/{{ds}}/asr/.partial/{{shard}}.jsonl",
        grammars=lambda wc, input: flag_list("grammars", input.grammars),
        align_rejects=lambda wc, input: flag_list("align-rejects", input.align_rejects),
    shell:
        job_shell("asr run", "asr {params.job}")


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
        job_env("asr merge")
    envmodules:
        job_module("asr merge"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cmd=job_cmd("asr merge"),
    shell:
        job_shell("asr merge")
