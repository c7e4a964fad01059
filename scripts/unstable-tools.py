#!/usr/bin/env python3
"""Unpack today's Prometheus, Alertmanager and VictoriaMetrics from Debian's unstable
suite into a project-local folder, beside (never over) the system's Debian 12 tools.

    scripts/unstable-tools.py [--dest .tools/unstable] promtool prometheus ...

The mirror is the machine's own: the first Debian archive in its apt sources
(/etc/apt/sources.list and /etc/apt/sources.list.d/*.list, *.sources). The suite's
InRelease is checked with gpgv against the Debian archive keyring, Packages.xz and every
.deb against the SHA-256 sums that InRelease (and Packages) sign. Each package is unpacked
with ``dpkg-deb -x`` into ``<dest>/<package>`` and its binaries linked into ``<dest>/bin``;
``<dest>/VERSIONS`` records what was taken. The suite's versions move: whatever it holds
is taken, and promtool and prometheus must be of the 3.x line.

Tools already unpacked at the versions VERSIONS records are kept. Any failure is one line
on stderr and exit 1.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

SUITE = "unstable"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# tool -> (Debian package, path of the binary inside it)
TOOLS = {
    "promtool": ("promtool", "usr/bin/promtool"),
    "prometheus": ("prometheus", "usr/bin/prometheus"),
    "alertmanager": ("prometheus-alertmanager", "usr/bin/prometheus-alertmanager"),
    # Debian's name for it, which the e2e harness looks up on PATH
    "prometheus-alertmanager": ("prometheus-alertmanager", "usr/bin/prometheus-alertmanager"),
    "amtool": ("prometheus-alertmanager", "usr/bin/amtool"),
    "victoria-metrics": ("victoria-metrics", "usr/bin/victoria-metrics"),
    "vmalert": ("victoria-metrics", "usr/bin/vmalert"),
    "vmalert-tool": ("victoria-metrics", "usr/bin/vmalert-tool"),
}
MAJOR = {"promtool": 3, "prometheus": 3}  # the line each must be of


class Fail(Exception):
    pass


def mirror() -> str:
    """The first Debian archive URI in the machine's apt sources."""
    uris: list[str] = []
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        try:
            for line in Path(path).read_text().splitlines():
                m = re.match(r"\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
                if m:
                    uris.append(m.group(1))
        except OSError:
            continue
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
            if "deb" in fields.get("Types", "").split() and fields.get("Enabled", "yes") != "no":
                uris.extend(fields.get("URIs", "").split())
    for uri in uris:
        if re.search(r"/debian/?$", uri):
            return uri.rstrip("/")
    raise Fail("no Debian archive (a URI ending in /debian) in /etc/apt/sources.list(.d); "
               "add the machine's Debian mirror to apt's sources")


def fetch(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.read()
    except OSError as err:
        raise Fail(f"cannot download {url}: {err}") from None


def verified_release(base: str, work: Path) -> str:
    """The InRelease text of the suite, after gpgv accepted its signature."""
    path = work / "InRelease"
    path.write_bytes(fetch(f"{base}/dists/{SUITE}/InRelease"))
    run = subprocess.run(["gpgv", "--keyring", KEYRING, str(path)], capture_output=True, text=True)
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        raise Fail(f"gpgv rejected {SUITE}/InRelease against {KEYRING}: {last}")
    return path.read_text()


def sha256_of(release: str, name: str) -> str:
    section = release.split("\nSHA256:", 1)[-1]
    for line in section.splitlines()[1:]:
        if not line.startswith(" "):
            break
        digest, _size, fname = line.split()
        if fname == name:
            return digest
    raise Fail(f"{SUITE}/InRelease lists no SHA256 for {name}")


def checked(data: bytes, digest: str, what: str) -> bytes:
    if hashlib.sha256(data).hexdigest() != digest:
        raise Fail(f"{what}: SHA256 mismatch with the signed index")
    return data


def packages(base: str, release: str, arch: str) -> dict[str, dict[str, str]]:
    name = f"main/binary-{arch}/Packages.xz"
    raw = checked(fetch(f"{base}/dists/{SUITE}/{name}"), sha256_of(release, name), name)
    out: dict[str, dict[str, str]] = {}
    for stanza in lzma.decompress(raw).decode("utf-8", "replace").split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z0-9-]+): (.*)$", stanza, re.M))
        if "Package" in fields:
            out[fields["Package"]] = fields
    return out


def recorded(dest: Path) -> dict[str, str]:
    try:
        return dict(line.split(" ", 1) for line in (dest / "VERSIONS").read_text().splitlines()
                    if " " in line)
    except OSError:
        return {}


def version_major(binary: Path) -> int | None:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"version (\d+)\.", out.stdout + out.stderr)
    return int(m.group(1)) if m else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tools", nargs="+", choices=sorted(TOOLS))
    ap.add_argument("--dest", type=Path, default=Path(".tools") / SUITE)
    args = ap.parse_args(argv)
    dest: Path = args.dest.resolve()
    bindir = dest / "bin"
    wanted = sorted({TOOLS[t][0] for t in args.tools})
    have = recorded(dest)
    if all(p in have for p in wanted) and all((bindir / t).exists() for t in args.tools):
        return 0
    try:
        arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                              text=True, check=True).stdout.strip()
        base = mirror()
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            release = verified_release(base, work)
            index = packages(base, release, arch)
            for pkg in wanted:
                if pkg not in index:
                    raise Fail(f"{SUITE} has no package {pkg} for {arch}")
                meta = index[pkg]
                deb = checked(fetch(f"{base}/{meta['Filename']}"), meta["SHA256"], meta["Filename"])
                path = work / f"{pkg}.deb"
                path.write_bytes(deb)
                target = dest / pkg
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir(parents=True)
                subprocess.run(["dpkg-deb", "-x", str(path), str(target)], check=True,
                               capture_output=True)
                have[pkg] = meta["Version"]
        bindir.mkdir(parents=True, exist_ok=True)
        for tool in args.tools:
            pkg, inner = TOOLS[tool]
            src = dest / pkg / inner
            if not src.exists():
                raise Fail(f"{pkg} {have.get(pkg)} ships no {inner}")
            link = bindir / tool
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(os.path.relpath(src, bindir))
            if tool in MAJOR and version_major(link) != MAJOR[tool]:
                raise Fail(f"{SUITE}'s {tool} is not of the {MAJOR[tool]}.x line "
                           f"(package {pkg} {have.get(pkg)})")
        (dest / "VERSIONS").write_text("".join(f"{p} {v}\n" for p, v in sorted(have.items())))
    except Fail as err:
        print(f"unstable-tools: {err}", file=sys.stderr)
        return 1
    except (OSError, subprocess.CalledProcessError, lzma.LZMAError) as err:
        print(f"unstable-tools: {err}", file=sys.stderr)
        return 1
    for pkg in wanted:
        print(f"{SUITE}: {pkg} {have[pkg]} in {dest / pkg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
