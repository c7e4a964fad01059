"""obsgen.instrument: publish the metric contract from a PyTorch training loop.

    from obsgen.instrument import Telemetry

    tel = Telemetry.from_env(job_id="llm-pretrain-a", planned_steps=100_000).start()
    tel.torch.register_ddp(model)            # DDP: gradient-ready marks, bytes, time (dp)
    tel.torch.name_group(tp_group, "tp")     # Megatron-style groups, then:
    undo = tel.torch.patch_distributed()     # time and bytes of torch.distributed calls
    for batch in data:
        with tel.step():
            with tel.compute():
                loss = model(batch).mean()
                loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        tel.loss(loss.item())
        tel.grad_norm(norm.item())
        if due:
            with tel.checkpoint():
                save(model)
    tel.close()

Each rank serves its metrics at ``port_base + local_rank`` (``OBSGEN_PORT_BASE``, default
9400; 0 picks a free port) or, with ``multiprocess_dir``, writes them for local rank 0 to
serve. ``sd_dir`` writes a Prometheus file_sd target per rank. Labels follow the
contract: job_id, rank, stage (pipeline stage, 0 without PP) and node (the host name).

This package imports neither torch nor prometheus_client until it needs them: torch only
when ``tel.torch`` is used (obsgen's ``torch`` extra, or a torch of your own), prometheus_client on
``start()``, so the multiprocess mode can still be enabled before it loads.
"""
from __future__ import annotations

from .core import Telemetry

__all__ = ["Telemetry"]

