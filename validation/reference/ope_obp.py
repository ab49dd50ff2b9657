#!/usr/bin/env python3
"""Open Bandit Pipeline's estimators on the log `aviary evaluate --decisions` wrote.

Reads FOLDER/decisions.csv (each logged decision, per log read: the variant, reward, the device's
and the server's propensity, the outcome model's predictions q_hat_<v>, each candidate's policy in force
<candidate>|pi_<v>) and recomputes, with obp 0.5.7's InverseProbabilityWeighting,
SelfNormalizedInverseProbabilityWeighting and DoublyRobust, every estimate in FOLDER/ope.csv.
Prints the largest absolute difference and the number of estimates compared.

obp imports torch at its top level for its neural policy learners (obp.policy) and to accept
tensors in obp.utils; its off-policy estimators are NumPy code that never calls it. PyPI's torch
is gigabytes, and obp 0.5.7 pins a torch that has no wheel for this Python, so a stand-in module
named torch, whose attributes are empty classes, lets obp import; no estimate touches it.

Usage: ope_obp.py FOLDER
"""
import csv
import os
import sys
import tempfile
import types
from collections import defaultdict


def install_torch_stand_in():
    class Anything(type):
        def __getattr__(cls, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Anything(name, (), {})

    def module(name):
        m = types.ModuleType(name)
        def attribute(name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Anything(name, (), {})
        m.__getattr__ = attribute
        sys.modules[name] = m
        return m

    torch = module("torch")
    for name in ["nn", "nn.functional", "optim", "utils", "utils.data"]:
        child = module("torch." + name)
        parent = sys.modules["torch." + name.rsplit(".", 1)[0]] if "." in name else torch
        setattr(parent, name.rsplit(".", 1)[-1], child)


install_torch_stand_in()
import numpy as np  # noqa: E402
from obp.ope import DoublyRobust, InverseProbabilityWeighting, SelfNormalizedInverseProbabilityWeighting  # noqa: E402


def main(folder):
    with open(os.path.join(folder, "decisions.csv"), newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames
        decisions = list(reader)
    with open(os.path.join(folder, "ope.csv"), newline="") as f:
        estimates = list(csv.DictReader(f))
    k = len([c for c in columns if c.startswith("q_hat_")])
    candidates = sorted({c.rsplit("|pi_", 1)[0] for c in columns if "|pi_" in c})
    groups = defaultdict(list)
    for d in decisions:
        groups[(d["replicate"], d["experiment"], d["log"])].append(d)
    largest, compared = 0.0, 0
    for row in estimates:
        # Each log (every draw, or what the server received) has its own outcome model and
        # candidates' policies in decisions.csv.
        log = groups[(row["replicate"], row["experiment"], row["log"])]
        source = "propensity" if row["propensities"] == "device" else "published"
        # A decision the source gave probability 0 cannot be weighed; Aviary counts it apart.
        log = [d for d in log if float(d[source]) > 0]
        width = sum(1 for c in range(k) if log and log[0][f"q_hat_{c}"] != "")
        action = np.array([int(d["variant"]) for d in log])
        reward = np.array([float(d["reward"]) for d in log])
        pscore = np.array([float(d[source]) for d in log])
        pi = np.array([[float(d[f"{row['candidate']}|pi_{v}"]) for v in range(width)] for d in log])[:, :, np.newaxis]
        q_hat = np.array([[float(d[f"q_hat_{v}"]) for v in range(width)] for d in log])[:, :, np.newaxis]
        estimator = {"ips": InverseProbabilityWeighting(), "snips": SelfNormalizedInverseProbabilityWeighting(), "dr": DoublyRobust()}[row["estimator"]]
        arguments = dict(reward=reward, action=action, pscore=pscore, action_dist=pi, position=None)
        if row["estimator"] == "dr":
            arguments["estimated_rewards_by_reg_model"] = q_hat
        value = estimator.estimate_policy_value(**arguments)
        largest = max(largest, abs(value - float(row["estimate"])))
        compared += 1
    assert candidates, "decisions.csv names no candidate"
    print(f"{float(largest)!r} {compared}")


if __name__ == "__main__":
    main(sys.argv[1])
