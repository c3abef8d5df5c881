# Plots and a stage table per dataset, embedded by `snakemake --report report.html`.


rule report_plots:
    input:
        report_inputs,
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
        stages=lambda wc: " ".join(config["stages"]),
        results=lambda wc: f"{RESULTS}/{wc.ds}",
        out_dir=lambda wc: f"{RESULTS}/{wc.ds}/report",
    shell:
        "{params.cmd} report plots --results {params.results:q} --stages {params.stages}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"
