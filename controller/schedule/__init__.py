"""Reconfiguration schedules of optical fabrics: the model, strict files, generators and the
ToRs' time-flow tables (all pure)."""

from controller.schedule.generators import GENERATORS, one_shot, opera, round_robin, strobe_matching
from controller.schedule.loader import (
    dump_schedule,
    load_schedule,
    parse_schedule,
    schedule_to_dict,
)
from controller.schedule.model import KINDS, CircuitPlan, Schedule, SliceAt
from controller.schedule.timeflow import ROUTINGS, Slots, TimeFlowEntry, slots, timeflow

__all__ = [
    "GENERATORS",
    "KINDS",
    "ROUTINGS",
    "CircuitPlan",
    "Schedule",
    "SliceAt",
    "Slots",
    "TimeFlowEntry",
    "dump_schedule",
    "load_schedule",
    "one_shot",
    "opera",
    "parse_schedule",
    "round_robin",
    "schedule_to_dict",
    "slots",
    "strobe_matching",
    "timeflow",
]
