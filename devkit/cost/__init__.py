"""The data-movement cost model: per-instruction costs, a streaming scheduler, the cost report,
closed-form bounds and calibration, over the hardware targets of :mod:`devkit.targets`.

Typical use (the simulator feeds the scheduler as a :class:`devkit.trace.TraceSink`)::

    from devkit.cost import Scheduler
    sched = Scheduler("trn1", kernel_name="my_kernel")
    ...                                  # simulator calls sched.emit(instr) per instruction
    sched.finish(memory_stats)
    report = sched.report()              # CostReport; report.to_dict() is the JSON object
"""

from devkit.cost.calibrate import Measurement, calibrate_file, fit, load_measurements
from devkit.cost.closed_form import Bound, Movement, blocked_matmul, fused_xuv, latency_bound, sequential_xuv
from devkit.cost.instr_cost import CostModel, covered_opcodes, instr_duration_ns
from devkit.cost.params import Params, ParamSet, default_params, load_params
from devkit.cost.render import render_table
from devkit.cost.report import CostReport, build_report
from devkit.cost.scheduler import Scheduler, schedule
from devkit.targets import TARGETS, Target, TargetError, load_target

__all__ = [
    "TARGETS",
    "Bound",
    "CostModel",
    "CostReport",
    "Measurement",
    "Movement",
    "ParamSet",
    "Params",
    "Scheduler",
    "Target",
    "TargetError",
    "blocked_matmul",
    "build_report",
    "calibrate_file",
    "covered_opcodes",
    "default_params",
    "fit",
    "fused_xuv",
    "instr_duration_ns",
    "latency_bound",
    "load_measurements",
    "load_params",
    "load_target",
    "render_table",
    "schedule",
    "sequential_xuv",
]
