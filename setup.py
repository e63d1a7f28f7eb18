"""Packages: setuptools' discovery for the project's packages, and ``mininet/`` mapped to the
package ``mlfabric_emulation`` (a name that cannot shadow the real Mininet; pyproject.toml
holds everything else)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["controller*", "pybmv2*", "packettest*", "workloads*", "mlfabric_base*"]),
              "mlfabric_emulation"],
    package_dir={"mlfabric_emulation": "mininet"},
)
