"""Pipeline cases: 8 ranks in p=4 stages of 2 ranks, m=16 microbatches (theoretical 1F1B
bubble 3/19 = 15.8%, so excess starts above 23.7%), busy-time noise of 3%."""
from obsgen.synth import Job, Restart, StageBubble

from ..support import At, Case, Fired, Never, Value

B = "Train_Bubble_Excess"
JOB = "llm-pretrain-pp"
MIN = 60


def pp(**kw) -> Job:
    return Job(**{"job_id": JOB, "pp": 4, "microbatches": 16, **kw})


CASES = {
    "a healthy pipeline job at the theoretical bubble fires nothing": Case(
        [pp()], 60,
        [Never(B), Value(30, 'job:pipeline_bubble:theoretical_ratio',
                         {f'job:pipeline_bubble:theoretical_ratio{{job_id="{JOB}"}}': 3 / 19})]),
    "one stage's bubble at 45% with p=4, m=16 fires for that stage only, after 30 minutes": Case(
        [pp(faults=(StageBubble(stage=2, bubble=0.45, start=10 * MIN),))], 55,
        [Never(B, end=40), At(45, B, (Fired({"job_id": JOB, "stage": "2"}, 45),)),
         At(55, B, (Fired({"job_id": JOB, "stage": "2"}, 45),))]),
    "a 45% bubble that lasts 20 minutes does not fire": Case(
        [pp(faults=(StageBubble(stage=2, bubble=0.45, start=10 * MIN),
                    StageBubble(stage=2, bubble=3 / 19, start=30 * MIN)))], 60, [Never(B)]),
    "a job without pipeline parallelism (p=1) never fires, whatever its idle time": Case(
        [Job(job_id=JOB, pp=1, microbatches=8, emit_pipeline=True)], 60,
        [Never(B), Value(30, 'job:pipeline_bubble:theoretical_ratio', {f'job:pipeline_bubble:theoretical_ratio{{job_id="{JOB}"}}': 0})]),
    "a restart with a 3-minute gap, counter resets and new instances fires no bubble alert": Case(
        [pp(faults=(Restart(at=40 * MIN, gap=3 * MIN),))], 80, [Never(B)]),
}
