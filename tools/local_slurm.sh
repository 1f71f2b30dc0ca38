#!/usr/bin/env bash
# A two-node SLURM cluster on this machine, to try and test hydra/launcher=submitit_slurm (Debian/Ubuntu, as root):
#   tools/local_slurm.sh start    # install slurm-wlm and munge if missing, start munged, slurmctld and the nodes n1, n2
#   tools/local_slurm.sh status   # the daemons and the nodes as SLURM sees them
#   tools/local_slurm.sh stop     # stop the nodes, the controller and munged
# The nodes are two slurmd on 127.0.0.1 (ports 6818, 6819), one CPU each, with their own spool directories, pid and
# log files (/var/log/slurm/slurmd-n1.log ...): one shared spool directory makes steps fail on the first node.
# n1 and n2 resolve to 127.0.0.1 in /etc/hosts (a DDP job's master address is its first node's name). No accounting
# (sacct says so: gpt1 then takes job states from squeue). `start` is idempotent and writes /etc/slurm/slurm.conf
# only if it is absent or was written by this script.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# written by gpt1's tools/local_slurm.sh"
LOGS=/var/log/slurm
NODES=(n1 n2)
PORTS=(6818 6819)

need_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "error: $0 $1 needs root (it installs packages, writes /etc and starts daemons)" >&2
        exit 2
    fi
}

install() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null &&
        command -v sbatch >/dev/null && return
    if ! command -v apt-get >/dev/null; then
        echo "error: slurm-wlm and munge are missing and this is no Debian/Ubuntu (no apt-get): install them" >&2
        exit 2
    fi
    echo "installing slurm-wlm and munge"
    local try
    for try in 1 2 3; do  # a mirror's hiccup is retried
        if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            slurm-wlm munge >/dev/null; then
            return
        fi
        sleep $((10 * try))
    done
    echo "error: apt-get could not install slurm-wlm and munge" >&2
    exit 1
}

write_conf() {
    if [ -f "$CONF" ] && ! grep -qxF "$MARK" "$CONF"; then
        echo "error: $CONF exists and was not written by $0: move it away to use the local cluster" >&2
        exit 2
    fi
    local host
    host=$(hostname -s 2>/dev/null || cut -d. -f1 /proc/sys/kernel/hostname)
    cat >"$CONF" <<EOF
$MARK
ClusterName=gpt1local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=6817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# a requeued job may start again after cred_expire seconds (default 120)
AuthInfo=cred_expire=10
CryptoType=crypto/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# start pending jobs within seconds of their becoming eligible (a requeued job; an array's next task)
SchedulerParameters=sched_interval=2,bf_interval=2
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
StateSaveLocation=/var/spool/slurmctld
SlurmctldPidFile=/run/slurmctld.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmdPidFile=/run/slurmd-%n.pid
SlurmdLogFile=$LOGS/slurmd-%n.log
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=600
KillWait=30
Waittime=0
NodeName=${NODES[0]} NodeAddr=127.0.0.1 Port=${PORTS[0]} CPUs=1 State=UNKNOWN
NodeName=${NODES[1]} NodeAddr=127.0.0.1 Port=${PORTS[1]} CPUs=1 State=UNKNOWN
PartitionName=local Nodes=${NODES[0]},${NODES[1]} Default=YES MaxTime=INFINITE State=UP
EOF
}

hosts() {
    local node
    for node in "${NODES[@]}"; do
        grep -qE "^127\.0\.0\.1[[:space:]].*\b$node\b" /etc/hosts || echo "127.0.0.1 $node" >>/etc/hosts
    done
}

running() {  # running PIDFILE: the daemon whose pid the file holds is alive
    [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

start() {
    need_root start
    install
    write_conf
    hosts
    mkdir -p "$LOGS" /var/spool/slurmctld /run/munge
    chown munge:munge /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        chown munge:munge /etc/munge/munge.key
        chmod 400 /etc/munge/munge.key
    fi
    if ! munge -n </dev/null >/dev/null 2>&1; then
        runuser -u munge -- munged --force
    fi
    running /run/slurmctld.pid || slurmctld
    local node
    for node in "${NODES[@]}"; do
        mkdir -p "/var/spool/slurmd/$node"
        running "/run/slurmd-$node.pid" || slurmd -N "$node"
    done
    # the nodes register with the controller within seconds: wait until both take jobs
    local i
    for i in $(seq 60); do
        if [ "$(sinfo -h -N -t idle,mix,alloc -o %N 2>/dev/null | sort -u | wc -l)" = "${#NODES[@]}" ]; then
            echo "local SLURM up: nodes ${NODES[*]} (sinfo; logs in $LOGS)"
            return
        fi
        # a node left down by an earlier stop comes back on its own (ReturnToService=2), or here
        [ "$i" = 10 ] && scontrol update nodename="${NODES[0]},${NODES[1]}" state=resume 2>/dev/null || true
        sleep 1
    done
    echo "error: the nodes did not register in 60 s; see $LOGS/slurmctld.log and $LOGS/slurmd-*.log" >&2
    sinfo -N >&2 || true
    exit 1
}

stop() {
    need_root stop
    local pidfile pid
    for pidfile in /run/slurmd-n1.pid /run/slurmd-n2.pid /run/slurmctld.pid; do
        if running "$pidfile"; then
            pid=$(cat "$pidfile")
            kill "$pid"
            for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        fi
    done
    if [ -f /run/munge/munged.pid ] && running /run/munge/munged.pid; then
        kill "$(cat /run/munge/munged.pid)"
    fi
    echo "local SLURM stopped"
}

status() {
    local pidfile name
    for name in slurmctld slurmd-n1 slurmd-n2; do
        pidfile=/run/$name.pid
        if running "$pidfile"; then echo "$name: running (pid $(cat "$pidfile"))"; else echo "$name: stopped"; fi
    done
    if running /run/slurmctld.pid; then sinfo -N; fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
