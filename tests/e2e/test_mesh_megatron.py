"""tel.torch.mesh_from_megatron() on real torch process groups (a one-process gloo world):
it reads Megatron-LM's parallel_state through the functions upstream names
(megatron/core/parallel_state.py: model_parallel_is_initialized,
get_{tensor_model,pipeline_model,data,context,expert_model}_parallel_group), names the
groups and publishes the place; a kind an older Megatron lacks is a group of one."""
from __future__ import annotations

import importlib.util
import os
import types

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    importlib.util.find_spec("torch") is None and os.environ.get("CI") != "true",
    reason="torch not installed: `make e2e` installs obsgen[torch]")]


@pytest.fixture
def world(tmp_path):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    yield dist
    dist.destroy_process_group()


def _state(dist, initialized=True, expert=True):
    groups = {k: dist.new_group([0]) for k in ("tp", "pp", "dp", "cp", "ep")}
    ps = types.SimpleNamespace(
        model_parallel_is_initialized=lambda: initialized,
        get_tensor_model_parallel_group=lambda: groups["tp"],
        get_pipeline_model_parallel_group=lambda: groups["pp"],
        get_data_parallel_group=lambda: groups["dp"],
        get_context_parallel_group=lambda: groups["cp"])
    if expert:
        ps.get_expert_model_parallel_group = lambda: groups["ep"]
    return ps, groups


@pytest.mark.parametrize("expert", [True, False], ids=["with EP", "an older Megatron without EP"])
def test_megatrons_groups_are_named_and_the_place_published(world, expert):
    from obsgen.instrument import Telemetry
    from obsgen.mesh import Place
    tel = Telemetry("j", port_base=0, addr="127.0.0.1").start()
    try:
        ps, groups = _state(world, expert=expert)
        place = tel.torch.mesh_from_megatron(parallel_state=ps)
        assert place == Place()
        for kind in ("tp", "pp", "dp", "cp") + (("ep",) if expert else ()):
            assert tel.torch.group_name(groups[kind]) == kind
        assert tel.place == place
    finally:
        tel.close(linger=0)


def test_an_uninitialized_megatron_is_refused_with_the_fix(world):
    from obsgen.instrument import Telemetry
    tel = Telemetry("j", port_base=0, addr="127.0.0.1").start()
    try:
        with pytest.raises(RuntimeError, match="after initialize_model_parallel"):
            tel.torch.mesh_from_megatron(parallel_state=_state(world, initialized=False)[0])
    finally:
        tel.close(linger=0)
