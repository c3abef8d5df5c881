# Plots and a stage table per dataset, embedded by `snakemake --report report.html`.


rule report_plots:
    input:
        lambda wc: PLAN.report_inputs(wc.ds),
    output:
        report_plot("duration_hist.png"),
        report_plot("speech_ratio_hist.png"),
        report_plot("segments_per_file.png"),
        report_plot("rejects_by_reason.png"),
        report_plot("throughput.png"),
        report(
            f"{RESULTS}/{{ds}}/report/stages.csv",
            caption="../report/stages.rst",
            category="{ds}",
        ),
    log:
        f"{RESULTS}/{{ds}}/logs/report_plots.log",
    conda:
        job_env("report plots")
    envmodules:
        job_module("report plots"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        cmd=job_cmd("report plots"),
        p=job_params("report plots"),
        results=lambda wc: f"{RESULTS}/{wc.ds}",
        out_dir=lambda wc: f"{RESULTS}/{wc.ds}/report",
    shell:
        job_shell("report plots")


rule report_curation:
    input:
        kept=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.jsonl"),
        rejects=per_shard(f"{RESULTS}/{{ds}}/curate/{{shard}}.rejects.jsonl"),
        speakers=f"{RESULTS}/{{ds}}/curate/speakers.jsonl",
        diarize=lambda wc: PLAN.diarize_report_files(wc.ds),
    output:
        report(
            f"{RESULTS}/{{ds}}/report/curation.html",
            caption="../report/curation.rst",
            category="{ds}",
        ),
        report_plot("curation_metrics.png"),
        report_plot("speakers_by_hours.png"),
        report_plot("diarization_turns.png"),
        report(
            f"{RESULTS}/{{ds}}/report/curation.csv",
            caption="../report/curation.rst",
            category="{ds}",
        ),
    log:
        f"{RESULTS}/{{ds}}/logs/report_curation.log",
    conda:
        job_env("report curation")
    envmodules:
        job_module("report curation"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cmd=job_cmd("report curation"),
        p=job_params("report curation"),
        results=lambda wc: f"{RESULTS}/{wc.ds}",
        out_dir=lambda wc: f"{RESULTS}/{wc.ds}/report",
    shell:
        job_shell("report curation")


rule report_annotations:
    input:
        manifests=expand(
            f"{RESULTS}/{{{{ds}}}}/tts/{{split}}_manifest.jsonl", split=("train", "val")
        ),
        stats=f"{RESULTS}/{{ds}}/tts/stats.json",
        summary=f"{RESULTS}/{{ds}}/curate/summary.json",
    output:
        report(
            f"{RESULTS}/{{ds}}/report/annotations.html",
            caption="../report/annotations.rst",
            category="{ds}",
        ),
        report_plot("annotations.png"),
    log:
        f"{RESULTS}/{{ds}}/logs/report_annotations.log",
    conda:
        job_env("report annotations")
    envmodules:
        job_module("report annotations"),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cmd=job_cmd("report annotations"),
        results=lambda wc: f"{RESULTS}/{wc.ds}",
        out_dir=lambda wc: f"{RESULTS}/{wc.ds}/report",
    shell:
        job_shell("report annotations")
