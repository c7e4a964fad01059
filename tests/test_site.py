"""The README and the docs site (mkdocs.yml): the README stays a short guide whose alert table is the
rendered alerts, and every link in it and in docs/ leads somewhere. `make docs` (run by
`make test`) builds the site with mkdocs --strict, which checks the links between pages;
these tests check what mkdocs cannot: the README, and links into the repository."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from obsgen import pipeline
from obsgen.config import defaults

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")
README = (ROOT / "README.md").read_text()


def _pages() -> list[Path]:
    return sorted((ROOT / "docs").rglob("*.md"))


def test_the_readme_is_read_in_five_minutes():
    assert len(README.splitlines()) <= 200


def test_the_readme_alert_table_is_the_rendered_alerts():
    rendered = {(r["alert"], r["labels"]["severity"], r["labels"]["team"])
                for path, text in pipeline.render_all(defaults()).items() if path.startswith("rules/")
                for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "alert" in r}
    rows = {tuple(c.strip() for c in line.split("|")[1:4])
            for line in README.splitlines() if line.startswith("| Train_")}
    assert rows == rendered


def test_the_quick_start_queries_a_series_its_profile_records():
    """The query the quick start points at is recorded by the rules it renders (the e2e
    profile, no dashboards.records), not only by the panels family."""
    from obsgen import config, registry
    (query,) = re.findall(r"the query `([a-z_:0-9]+)`", README)
    cfg = config.load(ROOT / "e2e" / "obsgen-e2e.yaml", alert_names=registry.alert_names())
    records = {r["record"] for path, text in pipeline.render_all(cfg).items()
               if path.startswith("rules/") for g in yaml.safe_load(text)["groups"]
               for r in g["rules"] if "record" in r}
    assert query in records


def _target(page: Path, link: str) -> Path | None:
    """The file a link names, or None for a link that leaves the repository."""
    if re.match(r"[a-z]+:", link) or link.startswith("#"):
        return None
    return (page.parent / link.split("#")[0]).resolve()


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *_pages()],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_names_a_file_of_the_repository(page):
    missing = [link for link in LINK.findall(page.read_text())
               if (t := _target(page, link)) is not None and not t.exists()]
    assert missing == []


def test_no_link_leaves_the_docs_site():
    """mkdocs serves docs/ only: a relative link out of it would break on the site, and
    obsgen has no public repository to link into: files beside the docs are named, not
    linked."""
    docs = (ROOT / "docs").resolve()
    out = [(str(p.relative_to(ROOT)), link) for p in _pages() for link in LINK.findall(p.read_text())
           if (t := _target(p, link)) is not None and docs not in t.parents]
    assert out == []


# hosts that exist, or that no one can own (RFC 2606 and 6761: example, invalid, loopback)
# (the shipped schemas' READMEs and licences name Grafana's, Kubernetes' and Apache's sites)
REAL_HOSTS = {"json-schema.org", "nvidia.github.io", "grafana.com", "kubernetes.io",
              "git.k8s.io", "www.apache.org", "127.0.0.1", "localhost"}
REAL_REPOS = {"grafana/grafana"}
RESERVED = re.compile(r"(^|\.)(example(\.com|\.org|\.net)?|invalid)$")
URL = re.compile(r"https?://([A-Za-z0-9.-]+)(/[A-Za-z0-9._-]+/[A-Za-z0-9._-]+)?")


def test_no_invented_address_anywhere():
    """No URL, package or repository that does not exist: every host named in a tracked
    file is a real one obsgen's code or docs rely on, or a reserved example name."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    bad = []
    for rel in files:
        path = ROOT / rel
        if path.suffix in (".png", ".whl") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        bad += [(rel, host + repo) for host, repo in URL.findall(text)
                if not (host in REAL_HOSTS or RESERVED.search(host)
                        or host == "github.com" and repo.strip("/") in REAL_REPOS)]
        bad += [(rel, m) for m in re.findall(r"pip install [\"']?obsgen\b[^ \n]*", text)]
    assert bad == []


def _blocks(lang: str) -> list[tuple[str, str]]:
    fence = re.compile(rf"^```{lang}\n(.*?)^```", re.M | re.S)
    return [(str(p.relative_to(ROOT)), b) for p in _pages() if "guides" in p.parts
            for b in fence.findall(p.read_text())]


@pytest.mark.parametrize("where,block", _blocks("yaml"), ids=lambda x: x[:40])
def test_the_guides_yaml_parses(where, block):
    assert yaml.safe_load(block) is not None


@pytest.mark.promtool
def test_the_bare_metal_prometheus_config_is_valid(tmp_path):
    [block] = [b for w, b in _blocks("yaml") if "scrape_configs" in b]
    path = tmp_path / "prometheus.yml"
    path.write_text(block)
    done = subprocess.run([shutil.which("promtool") or "promtool", "check", "config", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_site_lists_every_page_but_the_runbooks():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    listed = set()
    def walk(items):
        for item in items:
            for v in item.values():
                walk(v) if isinstance(v, list) else listed.add(v)
    walk(nav)
    pages = {str(p.relative_to(ROOT / "docs")) for p in _pages() if "runbooks" not in p.parts}
    assert listed == pages


def _mkdocs() -> str:
    path = Path(sys.executable).parent / "mkdocs"
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("mkdocs missing: make docs installs it")
        pytest.skip("mkdocs not installed: make docs")
    return str(path)


# sentence -> a line appended to a guide that must fail the strict build
BROKEN = {
    "a link to a page that does not exist": "[x](missing.md)",
    "an anchor no heading of the page makes": "[x](sizing.md#no-such-section)",
    "a relative link out of docs/": "[x](../../README.md)",
}


@pytest.mark.parametrize("line", list(BROKEN.values()), ids=list(BROKEN))
def test_the_strict_site_build_fails_on(line, tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path)
    build = lambda: subprocess.run([_mkdocs(), "build", "--strict"], cwd=tmp_path, text=True,
                                   capture_output=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert build().returncode == 0
    with open(tmp_path / "docs" / "guides" / "sizing.md", "a") as fh:
        fh.write(f"\n{line}\n")
    done = build()
    assert done.returncode != 0 and "strict mode" in done.stdout + done.stderr
