#!/usr/bin/env bash
# obsgen nccl-exporter under Slurm: one exporter per node, started in the background of
# the batch script, next to the training tasks.
#
#   sbatch --nodes=4 --gpus-per-node=8 slurm-per-node.sh
#
# Each node's ranks dump into a node-local directory; that node's exporter reads them and
# aligns the groups that live on the node (TP=8 here). To align groups across nodes as
# well (DP, EP), point NCCL_INSPECTOR_DUMP_DIR at a shared filesystem and run a single
# exporter for the job instead (srun --nodes=1 --ntasks=1 ... on the first node): every
# rank's file is then visible to it. Do not run both over the same files: each would
# count every record.
#SBATCH --job-name=llm-pretrain
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
set -euo pipefail

export NCCL_PROFILER_PLUGIN=/opt/nccl/ext-profiler/inspector/libnccl-profiler-inspector.so
export NCCL_INSPECTOR_ENABLE=1
export NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=500
# Node-local and per job: the exporter's state file lives next to the dumps.
export NCCL_INSPECTOR_DUMP_DIR=/local/scratch/nccl-inspector/${SLURM_JOB_ID}
export OBSGEN_JOB_ID=${SLURM_JOB_NAME}-${SLURM_JOB_ID}

# One exporter per node (--overlap: it shares the nodes with the training step). Port
# 9410 on every node; Prometheus finds the nodes through its Slurm or file service
# discovery. It exits when the job ends (SIGTERM from Slurm saves its state first).
srun --overlap --nodes="${SLURM_JOB_NUM_NODES}" --ntasks-per-node=1 --cpus-per-task=1 \
    bash -c 'mkdir -p "$NCCL_INSPECTOR_DUMP_DIR" && exec obsgen nccl-exporter \
        --dump-dir "$NCCL_INSPECTOR_DUMP_DIR" --port 9410 --node "$(hostname -s)" \
        --group-rule tp:n_ranks=8,nnodes=1 --world-size "$SLURM_NTASKS"' &
exporters=$!

status=0
srun --kill-on-bad-exit=1 python train.py --tensor-model-parallel-size 8 || status=$?

kill -TERM "$exporters" 2>/dev/null || true
wait "$exporters" 2>/dev/null || true
exit "$status"
