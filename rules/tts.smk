# TTS features: per shard, audio features (codes, condition and emotion
# vectors), the spoken-form text (tts_normalize, with grammars built once by
# tts_grammars) and text ids as separate jobs, so a tokenizer or normalisation
# change reruns only the text side; then train/val manifests per dataset and
# across datasets.


rule tts_grammars:
    output:
        directory(f"{GRAMMARS}/{{lang}}"),
    log:
        f"{GRAMMARS}/logs/{{lang}}.log",
    wildcard_constraints:
        lang="[a-z]+",
    conda:
        "../envs/tts.yaml"
    envmodules:
        "speechprep/tts",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        cmd=speechprep("tts"),
    shell:
        "{params.cmd} tts grammars --language {wildcards.lang} --out-dir {output:q} > {log:q} 2>&1"


rule tts_normalize:
    input:
        segments=f"{RESULTS}/{{ds}}/asr/{{shard}}.jsonl",
        grammars=lambda wc: PLAN.grammar_dirs(),
    output:
        f"{RESULTS}/{{ds}}/tts/{{shard}}.normalized.jsonl",
    log:
        f"{RESULTS}/{{ds}}/logs/tts_normalize/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/tts_normalize/{{shard}}.tsv"
    conda:
        "../envs/tts.yaml"
    envmodules:
        "speechprep/tts",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=scaled(15, 60, of="segments"),
    params:
        cmd=speechprep("tts"),
        p=job_params("tts normalize"),
        grammars=lambda wc, input: flag_list("grammars", input.grammars),
    shell:
        "{params.cmd} tts normalize --segments {input.segments:q} --params {params.p:q}"
        " {params.grammars} --out {output:q} > {log:q} 2>&1"


rule tts_tokenizer:
    input:
        normalized=lambda wc: PLAN.tts_normalized_all(),
    output:
        model=f"{RESULTS}/{ALL}/tts/tokenizer.model",
        vocab=f"{RESULTS}/{ALL}/tts/tokenizer.vocab",
    log:
        f"{RESULTS}/{ALL}/logs/tts_tokenizer.log",
    conda:
        "../envs/tts.yaml"
    envmodules:
        "speechprep/tts",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        cmd=speechprep("tts"),
        p=job_params("tts tokenizer"),
    shell:
        "{params.cmd} tts tokenizer --normalized {input.normalized:q}"
        " --params {params.p:q} --model {output.model:q} > {log:q} 2>&1"


rule tts_features:
    input:
        segments=lambda wc: PLAN.tts_segments(wc.ds, wc.shard),
        units=f"{RESULTS}/{{ds}}/s2s/{{shard}}.units.jsonl",
        s2s_rejects=f"{RESULTS}/{{ds}}/s2s/{{shard}}.rejects.jsonl",
        models=lambda wc: PLAN.tts_encoder_files(),
    output:
        index=f"{RESULTS}/{{ds}}/tts/{{shard}}.features.jsonl",
        rejects=f"{RESULTS}/{{ds}}/tts/{{shard}}.rejects.jsonl",
        codes=directory(f"{RESULTS}/{{ds}}/tts/{{shard}}/codes"),
        condition=directory(f"{RESULTS}/{{ds}}/tts/{{shard}}/condition"),
        emo_vec=directory(f"{RESULTS}/{{ds}}/tts/{{shard}}/emo_vec"),
    log:
        f"{RESULTS}/{{ds}}/logs/tts/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/tts/{{shard}}.tsv"
    conda:
        "../envs/tts.yaml"
    envmodules:
        "speechprep/tts",
    threads: config["tts"]["threads"]
    resources:
        mem_mb=shard_memory(
            "tts",
            "segments",
            PLAN.tts_encoder_files(),
            batch_seconds=config["tts"]["cpu_batch_seconds"],
        ),
        runtime=scaled(30, 60, of="segments"),
    params:
        cmd=speechprep("tts"),
        p=job_params("tts features"),
        resume=f"{RESULTS}/{{ds}}/tts/.partial/{{shard}}.jsonl",
        out_dir=f"{RESULTS}/{{ds}}/tts/{{shard}}",
    shell:
        "{params.cmd} tts features --segments {input.segments:q} --units {input.units:q}"
        " --s2s-rejects {input.s2s_rejects:q} --params {params.p:q} --threads {threads}"
        " --resume {params.resume:q} --out {output.index:q} --rejects {output.rejects:q}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule tts_text:
    input:
        index=f"{RESULTS}/{{ds}}/tts/{{shard}}.features.jsonl",
        normalized=f"{RESULTS}/{{ds}}/tts/{{shard}}.normalized.jsonl",
        tokenizer=lambda wc: PLAN.tts_tokenizer(),
    output:
        index=f"{RESULTS}/{{ds}}/tts/{{shard}}.text.jsonl",
        rejects=f"{RESULTS}/{{ds}}/tts/{{shard}}.text_rejects.jsonl",
        ids=directory(f"{RESULTS}/{{ds}}/tts/{{shard}}/text_ids"),
    log:
        f"{RESULTS}/{{ds}}/logs/tts_text/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/tts_text/{{shard}}.tsv"
    conda:
        "../envs/tts.yaml"
    envmodules:
        "speechprep/tts",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=scaled(15),
    params:
        cmd=speechprep("tts"),
        p=job_params("tts text"),
    shell:
        "{params.cmd} tts text --index {input.index:q} --normalized {input.normalized:q}"
        " --tokenizer {input.tokenizer:q} --params {params.p:q} --out {output.index:q}"
        " --rejects {output.rejects:q} --ids-dir {output.ids:q} > {log:q} 2>&1"


rule tts_manifest:
    input:
        features=per_shard(f"{RESULTS}/{{ds}}/tts/{{shard}}.features.jsonl"),
        texts=per_shard(f"{RESULTS}/{{ds}}/tts/{{shard}}.text.jsonl"),
        rejects=per_shard(f"{RESULTS}/{{ds}}/tts/{{shard}}.rejects.jsonl"),
        text_rejects=per_shard(f"{RESULTS}/{{ds}}/tts/{{shard}}.text_rejects.jsonl"),
        pins=[str(REPO / "envs" / f"{env}.yaml") for env in ("vad", "asr", "s2s")],
        asr=per_shard(f"{RESULTS}/{{ds}}/asr/{{shard}}.jsonl"),
        units=per_shard(f"{RESULTS}/{{ds}}/s2s/{{shard}}.units.jsonl"),
        tokenizer=lambda wc: PLAN.tts_tokenizer(),
        kept=lambda wc: PLAN.curate_kept(wc.ds),
    output:
        train=f"{RESULTS}/{{ds}}/tts/train_manifest.jsonl",
        val=f"{RESULTS}/{{ds}}/tts/val_manifest.jsonl",
        stats=f"{RESULTS}/{{ds}}/tts/stats.json",
    log:
        f"{RESULTS}/{{ds}}/logs/tts_manifest.log",
    conda:
        "../envs/tts.yaml"
    envmodules:
        "speechprep/tts",
    threads: 1
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(30),
    params:
        cmd=speechprep("tts"),
        p=job_params("tts manifest"),
        kept=lambda wc, input: flag_list("kept", input.kept),
    shell:
        "{params.cmd} tts manifest --params {params.p:q} --tokenizer {input.tokenizer:q}"
        " --features {input.features:q} --texts {input.texts:q}"
        " --rejects {input.rejects:q} {input.text_rejects:q} --pins {input.pins:q}"
        " --asr {input.asr:q} --units {input.units:q} --train {output.train:q} --val {output.val:q}"
        " {params.kept} --stats {output.stats:q} > {log:q} 2>&1"


rule tts_combined:
    input:
        stats=expand(f"{RESULTS}/{{ds}}/tts/stats.json", ds=list(config["datasets"])),
        train=expand(f"{RESULTS}/{{ds}}/tts/train_manifest.jsonl", ds=list(config["datasets"])),
        val=expand(f"{RESULTS}/{{ds}}/tts/val_manifest.jsonl", ds=list(config["datasets"])),
    output:
        train=f"{RESULTS}/{ALL}/tts/train_manifest.jsonl",
        val=f"{RESULTS}/{ALL}/tts/val_manifest.jsonl",
        stats=f"{RESULTS}/{ALL}/tts/stats.json",
    log:
        f"{RESULTS}/{ALL}/logs/tts_combined.log",
    conda:
        "../envs/tts.yaml"
    envmodules:
        "speechprep/tts",
    threads: 1
    resources:
        mem_mb=scaled(4000),
        runtime=scaled(30),
    params:
        cmd=speechprep("tts"),
    shell:
        "{params.cmd} tts combined --stats-in {input.stats:q} --train-in {input.train:q}"
        " --val-in {input.val:q} --train {output.train:q} --val {output.val:q}"
        " --stats {output.stats:q} > {log:q} 2>&1"
