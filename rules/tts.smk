# TTS features: per shard, audio features (codes, condition and emotion
# vectors), the spoken-form text (tts_normalize, with grammars built once by
# tts_grammars) and text ids as separate jobs, so a tokenizer or normalisation
# change reruns only the text side; then train/val manifests per dataset and
# across datasets.


rule tts_grammars:
    output:
        out_dir=directory(f"{GRAMMARS}/{{lang}}"),
    log:
        f"{GRAMMARS}/logs/{{lang}}.log",
    wildcard_constraints:
        lang="[a-z]+",
    conda:
        job_env("tts grammars")
    envmodules:
        job_module("tts grammars"),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        cmd=job_cmd("tts grammars"),
        language=lambda wc: wc.lang,
    shell:
        job_shell("tts grammars")


rule tts_normalize:
    input:
        segments=f"{RESULTS}/{{ds}}/asr/{{shard}}.jsonl",
        grammars=lambda wc: PLAN.grammar_dirs(),
    output:
        out=f"{RESULTS}/{{ds}}/tts/{{shard}}.normalized.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/tts_normalize/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/tts_normalize/{{shard}}.tsv"
    conda:
        job_env("tts normalize")
    envmodules:
        job_module("tts normalize"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=scaled(15, 60, of="segments"),
    params:
        cmd=job_cmd("tts normalize"),
        p=job_params("tts normalize"),
        grammars=lambda wc, input: flag_list("grammars", input.grammars),
    shell:
        job_shell("tts normalize")


checkpoint tts_tokenizer:
    input:
        normalized=lambda wc: PLAN.tts_normalized_all(),
    output:
        model=f"{RESULTS}/{ALL}/tts/tokenizer.model",
        vocab=f"{RESULTS}/{ALL}/tts/tokenizer.vocab",
    log:
        f"{RESULTS}/{ALL}/logs/tts_tokenizer.log",
    conda:
        job_env("tts tokenizer")
    envmodules:
        job_module("tts tokenizer"),
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        cmd=job_cmd("tts tokenizer"),
        p=job_params("tts tokenizer"),
        kept=f"{RESULTS}/{ALL}/tts/.tokenizer",  # not an output: it outlives a rerun
    shell:
        job_shell("tts tokenizer")


rule tts_features:
    input:
        segments=lambda wc: PLAN.tts_segments(wc.ds, wc.shard),
        units=f"{RESULTS}/{{ds}}/s2s/{{shard}}.units.jsonl",
        s2s_rejects=f"{RESULTS}/{{ds}}/s2s/{{shard}}.rejects.jsonl",
        models=lambda wc: PLAN.tts_encoder_files(),
    output:
        out=f"{RESULTS}/{{ds}}/tts/{{shard}}.features.jsonl",
        rejects=f"{RESULTS}/{{ds}}/tts/{{shard}}.rejects.jsonl",
        codes=directory(f"{RESULTS}/{{ds}}/tts/{{shard}}/codes"),
        condition=directory(f"{RESULTS}/{{ds}}/tts/{{shard}}/condition"),
        emo_vec=directory(f"{RESULTS}/{{ds}}/tts/{{shard}}/emo_vec"),
    log:
        f"{RESULTS}/{{ds}}/logs/tts/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/tts/{{shard}}.tsv"
    conda:
        job_env("tts features")
    envmodules:
        job_module("tts features"),
    threads: config["tts"]["threads"]
    resources:
        mem_mb=shard_memory(
            "tts features",
            "segments",
            PLAN.tts_encoder_files(),
            batch=config["tts"]["batch"],
            device=config["tts"]["device"],
        ),
        runtime=scaled(30, 60, of="segments"),
    params:
        cmd=job_cmd("tts features"),
        p=job_params("tts features"),
        resume=f"{RESULTS}/{{ds}}/tts/.partial/{{shard}}.jsonl",
        out_dir=f"{RESULTS}/{{ds}}/tts/{{shard}}",
    shell:
        job_shell("tts features")


rule tts_text:
    input:
        index=f"{RESULTS}/{{ds}}/tts/{{shard}}.features.jsonl",
        normalized=f"{RESULTS}/{{ds}}/tts/{{shard}}.normalized.jsonl",
        tokenizer=lambda wc: PLAN.tts_tokenizer(),
    output:
        out=f"{RESULTS}/{{ds}}/tts/{{shard}}.text.jsonl",
        rejects=f"{RESULTS}/{{ds}}/tts/{{shard}}.text_rejects.jsonl",
        ids_dir=directory(f"{RESULTS}/{{ds}}/tts/{{shard}}/text_ids"),
        phoneme_ids_dir=directory(f"{RESULTS}/{{ds}}/tts/{{shard}}/phoneme_ids"),
    log:
        f"{RESULTS}/{{ds}}/logs/tts_text/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/tts_text/{{shard}}.tsv"
    conda:
        job_env("tts text")
    envmodules:
        job_module("tts text"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=scaled(15),
    params:
        cmd=job_cmd("tts text"),
        p=job_params("tts text"),
    shell:
        job_shell("tts text")


rule tts_manifest:
    input:
        features=per_shard(f"{RESULTS}/{{ds}}/tts/{{shard}}.features.jsonl"),
        texts=per_shard(f"{RESULTS}/{{ds}}/tts/{{shard}}.text.jsonl"),
        # the features' and the text ids' rejects
        rejects=lambda wc: per_shard(f"{RESULTS}/{{ds}}/tts/{{shard}}.rejects.jsonl")(wc)
        + per_shard(f"{RESULTS}/{{ds}}/tts/{{shard}}.text_rejects.jsonl")(wc),
        pins=[str(REPO / "envs" / f"{env}.yaml") for env in ("vad", "asr", "s2s")],
        asr=per_shard(f"{RESULTS}/{{ds}}/asr/{{shard}}.jsonl"),
        units=per_shard(f"{RESULTS}/{{ds}}/s2s/{{shard}}.units.jsonl"),
        tokenizer=lambda wc: PLAN.tts_tokenizer(),
        kept=lambda wc: PLAN.curate_kept(wc.ds),
        summary=lambda wc: PLAN.curate_summary(wc.ds),
    output:
        train=f"{RESULTS}/{{ds}}/tts/train_manifest.jsonl",
        val=f"{RESULTS}/{{ds}}/tts/val_manifest.jsonl",
        stats=f"{RESULTS}/{{ds}}/tts/stats.json",
    log:
        f"{RESULTS}/{{ds}}/logs/tts_manifest.log",
    conda:
        job_env("tts manifest")
    envmodules:
        job_module("tts manifest"),
    threads: 1
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(30),
    params:
        cmd=job_cmd("tts manifest"),
        p=job_params("tts manifest"),
        kept=lambda wc, input: flag_list("kept", input.kept),
        summary=lambda wc, input: flag_list("summary", input.summary),
        # the captions' edges of earlier runs (not an output: it outlives a rerun)
        caption_edges=lambda wc: flag_list(
            "caption-edges", [f"{RESULTS}/{wc.ds}/tts/.caption_edges.json"]
        ),
    shell:
        job_shell("tts manifest")


rule tts_combined:
    input:
        stats_in=expand(f"{RESULTS}/{{ds}}/tts/stats.json", ds=list(config["datasets"])),
        train_in=expand(f"{RESULTS}/{{ds}}/tts/train_manifest.jsonl", ds=list(config["datasets"])),
        val_in=expand(f"{RESULTS}/{{ds}}/tts/val_manifest.jsonl", ds=list(config["datasets"])),
    output:
        train=f"{RESULTS}/{ALL}/tts/train_manifest.jsonl",
        val=f"{RESULTS}/{ALL}/tts/val_manifest.jsonl",
        stats=f"{RESULTS}/{ALL}/tts/stats.json",
    log:
        f"{RESULTS}/{ALL}/logs/tts_combined.log",
    conda:
        job_env("tts combined")
    envmodules:
        job_module("tts combined"),
    threads: 1
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(30),
    params:
        cmd=job_cmd("tts combined"),
    shell:
        job_shell("tts combined")
