"""Dashboards the Kubernetes way: each rendered dashboard also as a manifest
(``dashboard_manifests.kinds``), under dashboards/kubernetes/.

- ``configmap``: a ConfigMap labelled for the Grafana sidecar
  (k8s-sidecar, as kube-prometheus-stack and the Grafana Helm chart run it). The sidecar
  watches ConfigMaps with its label (``grafana.sidecar.dashboards.label`` and
  ``labelValue``; ``grafana_dashboard: "1"`` by default) and writes each data key as a file
  Grafana's file provider reads. With ``grafana.sidecar.dashboards.folderAnnotation`` set
  to ``folder_annotation`` and ``provider.foldersFromFilesStructure: true``, the annotation
  names the Grafana folder.
- ``grafana-operator``: a ``grafana.integreatly.org/v1beta1`` GrafanaDashboard holding the
  JSON, imported into the Grafana resources whose labels match ``instance_selector``, in
  the folder ``folder``.

Kubernetes keeps an object under 1 MiB; ``kubectl apply`` (client side) also copies the
object into an annotation limited to 256 KiB, so a larger dashboard needs
``kubectl apply --server-side``. The manifests hold the dashboard JSON compact, which
keeps even the v2 dashboard within both (tests/test_manifests.py); the first limit is
checked here, with the file named.

Every render validates the manifests before anything is written (``problems``): the
ConfigMap against Kubernetes' own schema, the GrafanaDashboard against the
grafana-operator CRD's OpenAPI schema with unknown fields refused (as ``kubectl apply``'s
strict field validation does) and its metadata against Kubernetes' ObjectMeta, and the
names and data keys against the API server's rules. The schemas ship in ``schemas/``
(sources and licenses in each folder's README).
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import jsonschema

from .. import render
from ..config import Config
from ..passes import DefinitionError
from ..render import load_yaml

SOURCE = "obsgen/dashboards/manifests.py"
FOLDER = "dashboards/kubernetes"
OBJECT_LIMIT = 1 << 20  # bytes: etcd's default request limit, an object's ceiling
CLIENT_APPLY_LIMIT = 256 << 10  # bytes: the last-applied annotation of kubectl apply
SUFFIX = {"configmap": "configmap", "grafana-operator": "grafanadashboard"}


def _configmap(name: str, key: str, text: str, m: dict) -> dict:
    meta = {"name": name, "namespace": m["namespace"],
            "labels": {**m["sidecar_label"], "app.kubernetes.io/part-of": "obsgen"}}
    if m["folder"]:
        meta["annotations"] = {m["folder_annotation"]: m["folder"]}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {key: text}}


def _grafana_dashboard(name: str, key: str, text: str, m: dict) -> dict:
    spec = {"instanceSelector": {"matchLabels": dict(m["instance_selector"])}}
    if m["folder"]:
        spec["folder"] = m["folder"]
    spec["json"] = text
    return {"apiVersion": "grafana.integreatly.org/v1beta1", "kind": "GrafanaDashboard",
            "metadata": {"name": name, "namespace": m["namespace"],
                         "labels": {"app.kubernetes.io/part-of": "obsgen"}},
            "spec": spec}


BUILD = {"configmap": _configmap, "grafana-operator": _grafana_dashboard}


def files(dashboards: dict[str, str], cfg: Config) -> dict[str, str]:
    """{path: manifest} for each dashboard JSON in ``dashboards`` ({path: text}) and each
    kind the config asks for."""
    m = cfg["dashboard_manifests"]
    out, problems = {}, []
    for path, text in sorted(dashboards.items()):
        if not (path.startswith("dashboards/") and path.endswith(".json")):
            continue
        stem = path.rsplit("/", 1)[1][:-len(".json")]
        name = f"{m['name_prefix']}{stem}"  # the schema keeps the prefix short
        # compact: the v2 dashboard's indented JSON alone is more than client-side apply takes
        compact = json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
        for kind in m["kinds"]:
            target = f"{FOLDER}/{stem}.{SUFFIX[kind]}.yaml"
            doc = BUILD[kind](name, f"{stem}.json", compact, m)
            size = len(json.dumps(doc).encode())
            if size > OBJECT_LIMIT:
                problems.append(f"{target}: {size} bytes, more than a Kubernetes object "
                                f"holds ({OBJECT_LIMIT})")
                continue
            out[target] = render.dump_yaml(doc, SOURCE)
    if problems:
        raise DefinitionError(problems)
    return out



SCHEMAS = Path(__file__).resolve().parent / "schemas"
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DATA_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _strict(schema):
    """``schema`` with unknown fields refused wherever it lists the known ones."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out \
            and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.lru_cache(maxsize=1)
def validators() -> dict[str, jsonschema.protocols.Validator]:
    configmap = json.loads((SCHEMAS / "kubernetes" / "configmap-v1.json").read_text())
    crd = json.loads((SCHEMAS / "grafana-operator" / "grafanadashboard-v1beta1.json").read_text())
    crd = _strict(crd)
    crd["properties"]["metadata"] = configmap["properties"]["metadata"]
    return {"ConfigMap": jsonschema.Draft202012Validator(configmap),
            "GrafanaDashboard": jsonschema.Draft7Validator(crd)}


def problems(rendered: dict[str, str]) -> list[str]:
    """What the API server would refuse in the rendered manifests, one line each."""
    import yaml

    out = []
    for path, text in sorted(rendered.items()):
        if not path.startswith(FOLDER + "/"):
            continue
        doc = load_yaml(text)
        found = [f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:200]}"
                 for e in validators()[doc["kind"]].iter_errors(doc)]
        name = doc["metadata"]["name"]
        if len(name) > 253 or not SUBDOMAIN.match(name):
            found.append(f"metadata.name: {name!r} is not a DNS-1123 subdomain")
        found += [f"data: key {k!r} is not letters, digits, -, _ or ."
                  for k in doc.get("data", {}) if not DATA_KEY.match(k)]
        out += [f"{path}: Kubernetes schema: {p}" for p in found]
    return out
