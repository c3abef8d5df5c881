# Music: per shard, after VAD (and diarization where it runs), before ASR: each segment's
# music_prob, music alone dropped (background_music), files with music under their speech
# separated where separate.model is set (the vocals FLAC the stages after it read). Runs
# when `music` is in `stages:`; ASR and the stages after it then read its segments.


rule music:
    input:
        segments=lambda wc: PLAN.music_input(wc.ds, wc.shard),
        models=lambda wc: PLAN.music_model_files(),
    output:
        out=f"{RESULTS}/{{ds}}/music/{{shard}}.segments.jsonl",
        rejects=f"{RESULTS}/{{ds}}/music/{{shard}}.rejects.jsonl",
        vocals=directory(f"{RESULTS}/{{ds}}/music/{{shard}}.vocals"),
    log:
        f"{RESULTS}/{{ds}}/logs/music/{{shard}}.log",
    benchmark:
        f"{RESULTS}/{{ds}}/benchmarks/music/{{shard}}.tsv"
    conda:
        job_env("music run")
    envmodules:
        job_module("music run"),
    threads: config["music"]["threads"]
    resources:
        mem_mb=shard_memory("music run", "segments", lambda wc: PLAN.music_model_files()),
        # per audio hour: the signal rule alone, or with a separation model (not measured with
        # real weights: docs/stages/music.md, "The music stage in the workflow")
        runtime=audio_minutes(20, 120 if config["separate"]["model"] else 10, of="segments"),
    params:
        cmd=job_cmd("music run"),
        p=job_params("music run"),
        resume=f"{RESULTS}/{{ds}}/music/.partial/{{shard}}.jsonl",
    shell:
        job_shell("music run")
