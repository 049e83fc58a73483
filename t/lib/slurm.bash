# slurm.bash — a Slurm of one's own for t/slurm.sh and bench/providers/run
# (sourced; not a test; safe under set -eu): the Debian packages' slurmctld and slurmd (22.05)
# on loopback, configured in a directory of the caller's, started in the
# foreground as the caller's children, never a system service.
#   slurm_up DIR   write DIR/slurm.conf and DIR/gres.conf, start both daemons,
#                  wait (30 s at most) until the node is idle; sets SC (the
#                  slurm.conf), SNODE (the node's name). 1 when it does not
#                  come up (the daemons' logs are in DIR).
#   slurm_down     cancel every job of this user there, stop both daemons,
#                  kill job steps left behind (they carry SLURM_CONF=$SC).
#   sl CMD...      run a Slurm command against it.
# The node is this machine as `slurmd -C` sees it (its CPUs and sockets must
# match, or the node is INVAL), with a gpu GRES of 4 empty files standing
# in for devices (slurmd drops file-less GPUs). auth/none and cred/none
# need no munge. Jobs leave squeue 2 s after they end (MinJobAge); a slow
# slurmd on a loaded machine is not declared down (SlurmdTimeout 120 s).
SLURM_PIDS=()

sl() { SLURM_CONF=$SC "$@"; }

_slurm_port() { python3 -S -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

slurm_up()
{
    local dir=$1 node_line me i
    mkdir -p "$dir/state" "$dir/spool" "$dir/dev"
    SC=$dir/slurm.conf
    node_line=$(slurmd -C | head -1)              # NodeName=H CPUs=.. ... RealMemory=..
    SNODE=$(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' <<<"$node_line")
    for i in 0 1 2 3; do : >"$dir/dev/gpu$i"; done
    me=$(id -un)
    cat >"$SC" <<EOF
ClusterName=drvtest
SlurmctldHost=$SNODE(127.0.0.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=$me
SlurmdUser=$me
SlurmctldPort=$(_slurm_port)
SlurmdPort=$(_slurm_port)
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdTimeout=120
MessageTimeout=10
InactiveLimit=0
MinJobAge=2
KillWait=2
SchedulerParameters=sched_interval=2
$node_line NodeAddr=127.0.0.1 Gres=gpu:4 State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
    echo "NodeName=$SNODE Name=gpu File=$dir/dev/gpu[0-3]" >"$dir/gres.conf"
    slurmctld -D -i -f "$SC" >"$dir/slurmctld.out" 2>&1 &
    SLURM_PIDS+=($!)
    slurmd -D -N "$SNODE" -f "$SC" >"$dir/slurmd.out" 2>&1 &
    SLURM_PIDS+=($!)
    for ((i = 0; i < 300; i++)); do
        sl sinfo --noheader -o '%t' 2>/dev/null | grep -qx idle && return 0
        sleep 0.1
    done
    return 1
}

slurm_down()
{
    local p i
    [ -n "${SC:-}" ] || return 0
    sl scancel -u "$(id -un)" >/dev/null 2>&1 || true
    for ((i = 0; i < 50; i++)); do
        [ -z "$(sl squeue --me --noheader 2>/dev/null)" ] && break
        sleep 0.2
    done
    for p in "${SLURM_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${SLURM_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    SLURM_PIDS=()
    # a job step left behind (slurmstepd, its processes) carries SLURM_CONF=$SC
    for p in $(grep -lsF "SLURM_CONF=$SC" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
        if [ "$p" != $$ ] && [ "$p" != "$BASHPID" ]; then kill -KILL "$p" 2>/dev/null || true; fi
    done
    return 0
}
