"""GPU clusters whose unit is the node type, placed by their scheduler: Slurm (slurm.py: sinfo/sbatch/squeue
read and asked; jobs.py: the job a type runs and what it leaves; flow.py: `cluster slurm`; modulefile.py:
Lmod/environment-modules files) and Kubernetes (kube.py: a Job per GPU product and a DaemonSet from a
snapshot, with the rules schemas miss)."""
