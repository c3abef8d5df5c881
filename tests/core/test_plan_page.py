"""The plan's page (speechprep.workflow.plan_page): what plan.json says, as tables a person reads."""

from html.parser import HTMLParser

from speechprep.workflow.plan_page import compare_html, plan_html, write_page


class Tables(HTMLParser):
    """Every table of a page: its class and its rows of cell texts (the header first)."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.current = None
        self.cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.current = self.tables.setdefault(dict(attrs)["class"], [])
        elif tag == "tr" and self.current is not None:
            self.current.append([])
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.current is not None:
            self.current[-1].append(self.cell)
            self.cell = None
        elif tag == "table":
            self.current = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def tables(text):
    p = Tables()
    p.feed(text)
    return p.tables


def stage(cpu_s, jobs):
    return {"jobs": jobs, "cpu_s": cpu_s, "gpu_s": 0.0, "peak_rss_mb": 900.0, "output_bytes": 2e9}


PLAN = {
    "datasets": {"calls": {"sample_hours": 1.0, "hours": 100.0, "scale": 100.0, "segments": 9000, "shards": 100}},
    "stages": {"vad": {**stage(7200.0, 100), "cpu_s_per_audio_hour": 72.0}, "asr": stage(36000.0, 101)},
    "total": {
        "jobs": 201,
        "cpu_s": 43200.0,
        "gpu_s": 0.0,
        "core_s": 50000.0,
        "output_bytes": 4e9,
        "cpu_s_interval": [40000.0, 46000.0],
    },
    "cluster": {"nodes": 2, "cores": 8, "gpus": 0, "mem_gb": 64},
    "wall_s": 3600.0,
    "wall_s_critical_path": 1800.0,
    "wall_s_capacity": 3600.0,
    "bottleneck": "asr",
    "cost": {"core_hours": 13.9, "gpu_hours": 0.0, "total": 0.28},
    "sample": {"fraction": 0.01, "seed": 0, "files": {"calls": [20, 2000]}},
    "rules": {
        "curate_duplicates": {
            "fits": {
                "calls.rss_mb": {"fixed": 180.0, "per_segment": 0.0},
                "calls.rss_mb.probe": {
                    "fixed": 110.0,
                    "per_item": 0.000264,
                    "points": [[333333.0, 198.0], [1000000.0, 374.0]],
                    "items": 1e7,
                },
            }
        }
    },
    "alternatives": {
        "diarize.enabled=false": {
            "total": {"jobs": 150, "cpu_s": 21600.0, "gpu_s": 0.0, "output_bytes": 3e9},
            "wall_s": 1800.0,
            "stages": {},
            "bottleneck": "asr",
            "ratio": {"cpu_s": 0.5, "gpu_s": None, "output_bytes": 0.75, "jobs": 0.746, "wall_s": 0.5},
        }
    },
}


def test_the_plan_page_shows_stages_totals_datasets_and_alternatives(tmp_path):
    page = write_page(tmp_path / "plan.html", plan_html(PLAN)).read_text(encoding="utf-8")
    t = tables(page)
    assert t["stages"][0][:3] == ["stage", "jobs", "CPU-h"]
    assert t["stages"][1][:3] == ["vad", "100", "2"] and t["stages"][2][:3] == ["asr", "101", "10"]
    assert t["total"][1][:4] == ["201", "12", "11.11", "12.78"]  # CPU-hours and their interval
    assert t["datasets"][1][0] == "calls" and "segments" in t["datasets"][0]
    assert t["alternatives"][1][0] == "diarize.enabled=false" and "0.5" in t["alternatives"][1]
    probe = dict(zip(t["probes"][0], t["probes"][1], strict=True))  # a run-wide job's memory probe
    assert probe["rule"] == "curate_duplicates" and probe["dataset"] == "calls" and probe["pilot's MB"] == "180"
    assert probe["probes"] == "333,333: 198 MB; 1,000,000: 374 MB" and probe["MB at the corpus's size"] == "2750"
    assert "bottleneck asr" in page and "Cost: 0.28" in page and "calls 20 of 2000" in page
    bare = {k: v for k, v in PLAN.items() if k not in ("alternatives", "cost")}
    assert "alternatives" not in tables(plan_html(bare)) and "Cost:" not in plan_html(bare)


def test_the_compare_page_sets_the_plan_beside_the_run():
    comparison = {
        "stages": {"vad": {"cpu_s": {"plan": 90.0, "run": 100.0, "ratio": 0.9}, "jobs": {"plan": 4, "run": 4}}},
        "total": {"cpu_s": {"plan": 90.0, "run": 100.0}},
    }
    t = tables(compare_html(comparison))
    header, row = t["compare"]
    assert row[header.index("cpu_s plan")] == "90" and row[header.index("cpu_s plan/run")] == "0.9"
    assert row[header.index("gpu_s run")] == ""  # not measured: empty, not zero
    assert t["total"][1] == ["cpu_s", "90", "100"]


def test_the_plan_page_shows_the_recommended_size_beside_the_config_s():
    from speechprep.workflow.bill import snakemake_cost

    rec = {"shard_hours": 50.0, "jobs": 400, "fixed_share": {"asr": 0.3333}, "notes": ["asr: its jobs would take 10"]}
    plan = {**PLAN, "recommended": rec, "snakemake": snakemake_cost(16000)}
    plan["snakemake_configured"] = snakemake_cost(800_000)
    page = plan_html(plan)
    header, sized, configured = tables(page)["sizing"]
    row = dict(zip(header, sized, strict=True))
    assert row["size"] == "recommended" and row["shard hours"] == "50" and row["DAG jobs"] == "16000"
    assert row["DAG MB"] == "432" and row["scheduler CPU-s"] == "114.1"  # 16,000 x 5.1 ms + 32.5 s for all
    assert dict(zip(header, configured, strict=True))["DAG MB"] == "2.16e+04"  # the page's 4 digits
    assert "shard_hours 50, --jobs 400" in page and "asr 33.3%" in page and "asr: its jobs would take 10" in page
    assert "sizing" not in tables(plan_html(PLAN))  # a plan without it: no table
