"""The cluster layer: getting runs onto machines and back, and the command lines around it.

`launch` (submitit: submit, reattach, wait), `executor` (the submitit executor a run goes out on and its
parameters), `rundir` (where a run lives, linked from each experiment that asks for it), `preflight` (a
run's refusals before anything is launched or written), `task` (what each task of a job runs: `TrainJob`),
`jobs` (a submitted job: alive, cancel, rebuild; local jobs as process groups), `slurm` (what Slurm is
asked for, refusals), `sites` (site presets), `estimate` (run time and GPU-hours from the performance
model), `lock` (one driver per results directory, one job per run), `interrupt` (Ctrl-C/SIGTERM),
`compat` (supported versions, GPU kernels), `doctor` (the preflight checks), `options` (command-line
options generated from the config fields), `exits` (the one-line refusals and exit codes), `regime` (the
paper's regime on one machine: core binding and the probe that picks the link rate).
"""
