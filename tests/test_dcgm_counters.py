"""The counters CSV obsgen ships for dcgm-exporter: read as dcgm-exporter reads it (Go's
encoding/csv with '#' comments, 3 fields a record, spaces trimmed), it enables every
field obsgen reads, with the contract's type, and keeps every field dcgm-exporter's own
default CSV enables."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from obsgen.contract import COUNTER, DCGM, DCGM_NOT_IN_DEFAULT_CSV, GAUGE, METRICS

CSV = Path(__file__).resolve().parent.parent / "examples" / "dcgm-exporter" / "obsgen-counters.csv"

# The fields dcgm-exporter 4.5.3-4.8.2 enables in etc/default-counters.csv (and its Helm
# chart's ConfigMap), with their types: replacing that file must not drop any.
DEFAULT_4_5_3 = {
    "DCGM_FI_DEV_SM_CLOCK": "gauge", "DCGM_FI_DEV_MEM_CLOCK": "gauge",
    "DCGM_FI_DEV_MEMORY_TEMP": "gauge", "DCGM_FI_DEV_GPU_TEMP": "gauge",
    "DCGM_FI_DEV_POWER_USAGE": "gauge", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter", "DCGM_FI_DEV_GPU_UTIL": "gauge",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "gauge", "DCGM_FI_DEV_ENC_UTIL": "gauge",
    "DCGM_FI_DEV_DEC_UTIL": "gauge", "DCGM_FI_DEV_XID_ERRORS": "gauge",
    "DCGM_FI_DEV_FB_FREE": "gauge", "DCGM_FI_DEV_FB_USED": "gauge",
    "DCGM_FI_DEV_FB_RESERVED": "gauge", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "counter",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": "gauge",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "counter",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "counter", "DCGM_FI_DEV_ROW_REMAP_FAILURE": "gauge",
    "DCGM_FI_DRIVER_VERSION": "label", "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gauge",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "gauge", "DCGM_FI_PROF_DRAM_ACTIVE": "gauge",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge", "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
}


def records() -> dict[str, str]:
    """Field -> type, as dcgm-exporter's ReadCSVFile and ExtractCounters take them."""
    lines = [line for line in CSV.read_text().splitlines() if not line.startswith("#")]
    out = {}
    for row in csv.reader(lines, strict=True):
        if not row:
            continue
        assert len(row) == 3, f"{row}: dcgm-exporter wants exactly 3 fields"
        assert not any('"' in f for f in row), f"{row}: Go's csv reader refuses bare quotes"
        name, kind, _help = (f.strip(" ") for f in row)
        assert kind in ("gauge", "counter", "label"), row
        assert name not in out, f"{name} listed twice"
        out[name] = kind
    return out


OBSGEN = {m.key: m.type for m in METRICS.values() if m.emitter.startswith(DCGM)}


@pytest.mark.parametrize("field", sorted(OBSGEN))
def test_every_field_obsgen_reads_is_enabled_with_its_type(field):
    assert records().get(field) == {COUNTER: "counter", GAUGE: "gauge"}[OBSGEN[field]]


@pytest.mark.parametrize("field", sorted(DEFAULT_4_5_3))
def test_every_default_field_is_kept(field):
    assert records().get(field) == DEFAULT_4_5_3[field]


def test_the_default_csv_lacks_what_the_file_adds():
    """The fields the file exists for are the ones obsgen reads beyond the defaults, as
    the contract (and the synthetic fleet's counters="default") name them."""
    assert set(OBSGEN) - set(DEFAULT_4_5_3) == DCGM_NOT_IN_DEFAULT_CSV
    assert set(records()) == set(DEFAULT_4_5_3) | DCGM_NOT_IN_DEFAULT_CSV
