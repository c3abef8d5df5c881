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
        "../envs/report.yaml"
    envmodules:
        "speechprep/report",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=15,
    params:
        cmd=speechprep("report"),
        p=job_params("report plots"),
        results=lambda wc: f"{RESULTS}/{wc.ds}",
        out_dir=lambda wc: f"{RESULTS}/{wc.ds}/report",
    shell:
        "{params.cmd} report plots --results {params.results:q} --params {params.p:q}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"


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
        "../envs/report.yaml"
    envmodules:
        "speechprep/report",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        cmd=speechprep("report"),
        p=job_params("report curation"),
        results=lambda wc: f"{RESULTS}/{wc.ds}",
        out_dir=lambda wc: f"{RESULTS}/{wc.ds}/report",
    shell:
        "{params.cmd} report curation --results {params.results:q} --params {params.p:q}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"
