"""TDTCP on an optical fabric: which hosts each ToR tells about TDN changes, and the ticks that
make it tell them on time (the TDNs themselves are :mod:`controller.schedule.tdn`'s)."""

from controller.tdtcp.notify import NOTIFY_SESSION, NotifyPlan, notify_plan

__all__ = ["NOTIFY_SESSION", "NotifyPlan", "notify_plan"]
