"""Jupyter's configuration for this environment, read by every Jupyter program it runs (JupyterLab's server,
nbgrader, nbconvert) from ``{sys.prefix}/etc/jupyter/``, where ``workshop jupyter-config`` links it.

Kernels get CurveZMQ keys from their kernel manager, so that what they exchange with it is encrypted; without
them ipykernel warns "Kernel is running over TCP without encryption" at every start (each ``nbgrader validate``,
each notebook opened in JupyterLab). jupyter_client's ``auto`` gives keys to kernels whose kernelspec declares
``curve`` (ipykernel's does) and starts the others as before.
"""
import zmq

c = get_config()  # noqa: F821 (provided by Jupyter when it loads this file)

if zmq.has("curve"):
    c.KernelManager.transport_encryption = "auto"
