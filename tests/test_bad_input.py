"""Every way a file handed to obsgen can be bad: one clear line naming the file and the
reason, exit 2, and nothing written. The config (obsgen.yaml) through the CLI, the paths
the commands write to, and the NCCL exporter's group maps, dump directory and state file
(which, being a sidecar that must keep running, skip a bad file with one warning)."""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import tempfile
from pathlib import Path

import pytest

from obsgen import config, pipeline, userfile
from obsgen.cli import main
from obsgen.nccl import groups
from obsgen.nccl.exporter import Exporter, Options

from .nccl_job import InspectorJob

BOMB = "\n".join(['a: &a ["x","x","x","x","x","x","x","x","x"]'] +
                 [f"{n}: &{n} [{','.join(['*' + p] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi")] +
                 ["metrics: *i"])


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _dir(path: Path) -> Path:
    path.mkdir()
    return path


# sentence -> (make the config at this path, what its one line says)
BAD_CONFIGS = {
    "bytes that are not UTF-8": (lambda p: _write(p, b"\x00\xff\xfe"), "line 1: not UTF-8 text"),
    "a byte that is not UTF-8 on a later line names that line":
        (lambda p: _write(p, b"presets: [default]\n# caf\xe9\n"), "line 2: not UTF-8 text"),
    "a NUL byte in otherwise valid text":
        (lambda p: _write(p, b"presets: [default]\nmetrics: {}\x00\n"), "line 2: contains a NUL byte"),
    "a path that does not exist": (lambda p: p, "does not exist"),
    "a path below a file": (lambda p: _write(p.parent / "f", b"x") / "obsgen.yaml", "does not exist"),
    "a directory": (_dir, "is a directory"),
    "a FIFO (reading it would block)": (_fifo, "is not a regular file"),
    "a file of many megabytes":
        (lambda p: _write(p, b"# padding\n" * 2_000_000 + b"presets: [default]\n"), "at most 1.0 MiB"),
    "a YAML alias bomb (billion laughs)": (lambda p: _write(p, BOMB.encode()), "expands to more than"),
    "deeply nested YAML (flow)":
        (lambda p: _write(p, b"[" * 100_000 + b"]" * 100_000), "nested deeper than 64 levels"),
    "deeply nested YAML (block)":
        (lambda p: _write(p, "".join(f"{' ' * i}k{i}:\n" for i in range(200)).encode()),
         "nested deeper than 64 levels"),
    "a YAML tag that constructs a Python object":
        (lambda p: _write(p, b'metrics: !!python/object/apply:os.system ["true"]\n'), "YAML tag"),
    "a YAML tag that names a Python module":
        (lambda p: _write(p, b"x: !!python/module:os\n"), "YAML tag"),
    "a YAML syntax error": (lambda p: _write(p, b"metrics: {a: [\n"), "invalid YAML"),
    "a mapping as a key (found by make fuzz)":
        (lambda p: _write(p, b"{{}}"), "line 1: invalid YAML: a key must be a plain value, got a dict"),
    "a list as a key": (lambda p: _write(p, b"? [a]\n: 1\n"), "a key must be a plain value, got a list"),
    "a list, not a mapping": (lambda p: _write(p, b"- a\n- b\n"), "must be a mapping"),
}


def _run(*argv: str) -> tuple[int, list[str], str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, [line for line in err.getvalue().splitlines() if line], out.getvalue()


@pytest.mark.parametrize("case", list(BAD_CONFIGS), ids=list(BAD_CONFIGS))
def test_a_bad_config_file_is_one_line_exit_2_and_nothing_written(tmp_path, case):
    make, reason = BAD_CONFIGS[case]
    path = make(tmp_path / "obsgen.yaml")
    out = tmp_path / "out"
    code, err, _ = _run("render", "--config", str(path), "--out", str(out))
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith(f"{path}: ") and reason in err[0], err
    assert not out.exists()


def test_an_unreadable_config_file_is_one_line_exit_2_and_nothing_written():
    """A file without read permission. Root reads any file, so as root the command runs in
    a forked child that has dropped to the unprivileged user nobody (uid 65534): the kernel
    itself refuses the read."""
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o777)
        path = _write(Path(tmp) / "obsgen.yaml", b"presets: [default]\n")
        path.chmod(0o000)
        out = Path(tmp) / "out"
        _run("render", "--out", str(Path(tmp) / "warm"))  # every module the render needs, loaded
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: drop root, run the command, report, exit at once
            try:
                os.close(read)
                if os.geteuid() == 0:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                code, err, _ = _run("render", "--config", str(path), "--out", str(out))
                os.write(write, json.dumps([code, err]).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as fh:
            result = fh.read()
        os.waitpid(pid, 0)
        code, err = json.loads(result)
        assert code == 2, err
        assert err == [f"{path}: cannot be read: permission denied"], err
        assert not out.exists()


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"],
                         ids=["empty", "blank lines", "only a comment", "an empty document"])
def test_a_config_without_settings_renders_the_defaults_and_says_so_once(tmp_path, text):
    path = _write(tmp_path / "obsgen.yaml", text.encode())
    code, err, _ = _run("render", "--config", str(path), "--out", str(tmp_path / "out"))
    assert code == 0
    assert err[0] == f"{path}: holds no settings; the defaults apply"
    assert len(err) == 2 and err[1].startswith("note: links.base_url is not set")
    rendered = {p.relative_to(tmp_path / "out").as_posix(): p.read_text()
                for p in (tmp_path / "out").rglob("*") if p.is_file() and not p.name.startswith(".")}
    assert rendered == pipeline.render_all(config.defaults())


def test_a_byte_order_mark_is_not_part_of_the_config(tmp_path):
    path = _write(tmp_path / "obsgen.yaml", "\ufeffthresholds: {straggler_ratio: 1.2}\n".encode())
    assert config.load(path)["thresholds"]["straggler_ratio"] == 1.2


def test_a_config_at_the_size_limit_is_read(tmp_path):
    body = b"presets: [default]\n"
    path = _write(tmp_path / "obsgen.yaml", b"#" * (config.CONFIG_LIMIT - len(body) - 1) + b"\n" + body)
    assert path.stat().st_size == config.CONFIG_LIMIT
    assert config.load(path)["presets"] == ["default"]


def test_anchors_and_aliases_within_reason_are_read(tmp_path):
    path = _write(tmp_path / "obsgen.yaml", b"teams: &t {platform: infra}\ncommon_labels: *t\n")
    assert config.load(path)["common_labels"] == {"platform": "infra"}


# paths the commands write to -------------------------------------------------------------
OUTPUTS = {
    "render --out naming a file": (["render", "--out", "{file}"], "{file}: --out: is a file"),
    "render --out below a file": (["render", "--out", "{file}/sub"], "{file}/sub: --out: is below"),
    "check --out naming a file": (["check", "--out", "{file}"], "{file}: --out: is a file"),
    "simulate --prometheus-config naming a directory":
        (["simulate", "--prometheus-config", "{dir}"], "{dir}: --prometheus-config: is a directory"),
    "simulate --prometheus-config in a folder that does not exist":
        (["simulate", "--prometheus-config", "{dir}/no/p.yml"], "its directory {dir}/no does not exist"),
    "simulate --prometheus-config with a --rules folder that does not exist":
        (["simulate", "--prometheus-config", "{dir}/p.yml", "--rules", "{dir}/none"],
         "{dir}/none: --rules: does not exist"),
    "simulate --port-file naming a directory":
        (["simulate", "--port-file", "{dir}", "--duration", "0"], "{dir}: --port-file: is a directory"),
    "simulate --file-sd below a file":
        (["simulate", "--file-sd", "{file}/sd.json", "--duration", "0"], "its directory {file} is a file"),
}


@pytest.mark.parametrize("case", list(OUTPUTS), ids=list(OUTPUTS))
def test_an_output_path_that_cannot_be_written_is_one_line_exit_2(tmp_path, case):
    argv, expected = OUTPUTS[case]
    f = _write(tmp_path / "a-file", b"mine\n")
    d = _dir(tmp_path / "a-dir")
    fill = {"file": str(f), "dir": str(d)}
    code, err, _ = _run(*[a.format(**fill) for a in argv])
    assert code == 2 and len(err) == 1 and expected.format(**fill) in err[0], err
    assert f.read_bytes() == b"mine\n" and list(d.iterdir()) == []


def test_a_directory_where_a_generated_file_goes_stops_the_render_and_writes_nothing(tmp_path):
    (tmp_path / "rules" / "stragglers.yaml").mkdir(parents=True)
    code, err, _ = _run("render", "--out", str(tmp_path))
    assert code == 2 and len(err) == 1 and "stragglers.yaml: is a directory where obsgen writes a file" in err[0], err
    assert sorted(p.name for p in (tmp_path / "rules").iterdir()) == ["stragglers.yaml"]
    assert not (tmp_path / "dashboards").exists()


def test_a_file_where_a_generated_folder_goes_stops_the_render(tmp_path):
    _write(tmp_path / "dashboards", b"mine\n")
    code, err, _ = _run("render", "--out", str(tmp_path))
    assert code == 2 and len(err) == 1, err
    assert f"{tmp_path / 'dashboards'}: is a file where obsgen writes a folder" in err[0], err
    assert (tmp_path / "dashboards").read_bytes() == b"mine\n" and not (tmp_path / "rules").exists()


# the NCCL exporter ---------------------------------------------------------------------
def _map(tmp: Path, name: str, data: bytes) -> Path:
    return _write(tmp / f"{groups.PREFIX}{name}.json", data)


def _valid_map() -> bytes:
    return json.dumps({"format": groups.FORMAT, "rank": 0, "world_size": 2, "hostname": "h",
                       "pid": 1, "groups": [{"group": "dp", "ranks": [0, 1]}]}).encode()


BAD_MAPS = {
    "bytes that are not UTF-8": (b'{"format": "\xff"}', "not UTF-8 text"),
    "a NUL byte": (b'{"format": 1}\x00', "contains a NUL byte"),
    "JSON that is cut off": (b'{"format": ', "not JSON"),
    "JSON nested 100 levels deep": (b"[" * 100 + b"]" * 100, "nested deeper than 64 levels"),
    "JSON nested 100,000 levels deep": (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 64 levels"),
    "a file of many megabytes": (b" " * (groups.MAP_LIMIT + 1), "at most 16.0 MiB"),
    "another JSON document": (b"[1, 2]", "not an obsgen.nccl.groups/v1 file"),
    "a group map with a field of the wrong type": (_valid_map().replace(b'"pid": 1', b'"pid": "1"'),
                                                   "pid an integer"),
}


@pytest.mark.parametrize("case", list(BAD_MAPS), ids=list(BAD_MAPS))
def test_a_bad_group_map_is_one_line_naming_the_file(tmp_path, case):
    data, reason = BAD_MAPS[case]
    path = _map(tmp_path, "r0", data)
    with pytest.raises(groups.GroupMapError) as exc:
        groups.read_group_map(path)
    line = str(exc.value)
    assert "\n" not in line and line.startswith(f"{path}: ") and reason in line, line


def test_a_group_map_that_is_a_directory_is_one_line(tmp_path):
    path = _dir(tmp_path / f"{groups.PREFIX}r0.json")
    with pytest.raises(groups.GroupMapError, match="is a directory"):
        groups.read_group_map(path)


def test_the_exporter_skips_bad_group_maps_with_one_warning_each_and_reads_the_good_ones(
        tmp_path, caplog):
    job = InspectorJob()
    job.write_group_maps(tmp_path)
    job.run(tmp_path, steps=2)
    for i, (case, (data, _)) in enumerate(BAD_MAPS.items()):
        _map(tmp_path, f"bad{i}", data)
    _dir(tmp_path / f"{groups.PREFIX}a-dir.json")
    e = Exporter(Options(dump_dir=tmp_path, state_file=tmp_path.parent / f"{tmp_path.name}.st"))
    with caplog.at_level(logging.WARNING, logger="obsgen.nccl"):
        e.drain()
        e.drain()  # a bad map is warned about once, not at every poll
    warned = [r.getMessage() for r in caplog.records if groups.PREFIX in r.getMessage()]
    assert len(warned) == len(BAD_MAPS) + 1, warned
    assert all("\n" not in w for w in warned)
    assert e.store.records > 0 and "unknown" not in {k[2] for k in e.store.ranks}


BAD_DIRS = {
    "--dump-dir naming a file": (["--dump-dir", "{file}"], "{file}: --dump-dir: is a file"),
    "--group-map-dir naming a file": (["--dump-dir", "{dir}", "--group-map-dir", "{file}"],
                                      "{file}: --group-map-dir: is a file"),
    "--state-file naming a directory": (["--dump-dir", "{dir}", "--state-file", "{dir}"],
                                        "{dir}: --state-file: is a directory"),
}


@pytest.mark.parametrize("case", list(BAD_DIRS), ids=list(BAD_DIRS))
def test_the_exporter_refuses_a_bad_directory_with_one_line_and_exit_2(tmp_path, case):
    argv, expected = BAD_DIRS[case]
    fill = {"file": str(_write(tmp_path / "f", b"x")), "dir": str(_dir(tmp_path / "d"))}
    code, err, out = _run("nccl-exporter", "--once", *[a.format(**fill) for a in argv])
    assert code == 2 and len(err) == 1 and expected.format(**fill) in err[0], err
    assert out == "" and list((tmp_path / "d").iterdir()) == []


def test_the_exporter_waits_for_a_dump_directory_the_job_has_not_created(tmp_path):
    code, err, out = _run("nccl-exporter", "--once", "--dump-dir", str(tmp_path / "later"))
    assert code == 0 and "obsgen_nccl_records_total" in out


def test_a_dump_directory_that_becomes_a_file_is_warned_about_once(tmp_path, caplog):
    d = _dir(tmp_path / "dump")
    e = Exporter(Options(dump_dir=d, state_file=tmp_path / "st"))
    e.drain()
    d.rmdir()
    _write(d, b"x")
    with caplog.at_level(logging.WARNING, logger="obsgen.nccl"):
        for _ in range(3):
            e.drain()
    assert len([r for r in caplog.records if "cannot list" in r.getMessage()]) == 1


BAD_STATES = {
    "bytes that are not UTF-8": b"\xff\xfe",
    "not JSON": b"{",
    "JSON nested 100,000 levels deep": b"[" * 100_000 + b"]" * 100_000,
    "a JSON list": b"[]",
    "the right version with fields of the wrong types":
        b'{"version": 1, "files": 3, "last_sn": {}, "metrics": []}',
    "the right version with a counter that is no number":
        b'{"version": 1, "files": [], "last_sn": [], "metrics": {"job_id": "unknown", '
        b'"ranks": [], "groups": [], "records": "many", "parse_errors": 0, "incomplete": {}}}',
}


@pytest.mark.parametrize("case", list(BAD_STATES), ids=list(BAD_STATES))
def test_a_bad_state_file_is_one_warning_and_a_fresh_start(tmp_path, case, caplog):
    job = InspectorJob()
    job.write_group_maps(tmp_path / "dump")
    job.run(tmp_path / "dump", steps=2)
    state = _write(tmp_path / "state", BAD_STATES[case])
    with caplog.at_level(logging.WARNING, logger="obsgen.nccl"):
        e = Exporter(Options(dump_dir=tmp_path / "dump", state_file=state))
    assert len([r for r in caplog.records if str(state) in r.getMessage()]) == 1
    assert e.store.records == 0 and e.drain() > 0



def test_a_simulated_mesh_the_ranks_do_not_fill_is_one_line_exit_2(tmp_path):
    code, err, out = _run("simulate", "--ranks", "6", "--scenario", "bubble", "--duration", "0")
    assert code == 2 and err == ["--ranks: ranks (6) must be a multiple of tp*cp*pp (4)"], err
