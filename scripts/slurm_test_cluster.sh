#!/usr/bin/env bash
# A real one-node SLURM on 127.0.0.1 for tests: munge + slurmctld + slurmd,
# state and logs under DIR, stopped by pid.
#
#   scripts/slurm_test_cluster.sh start DIR   # installs slurm-wlm + munge first when root
#   scripts/slurm_test_cluster.sh stop DIR
#
# No accounting (AccountingStorageType=accounting_storage/none): job status
# comes from squeue (profiles/slurm: slurm-status-command squeue,
# slurm-no-account). Finished jobs are written to DIR/jobcomp.txt
# (JobCompType=jobcomp/filetxt). The node advertises one "gpu" GRES (no device
# behind it) so that GPU rules' --gres=gpu:1 requests are scheduled as on a
# real cluster; their code runs on the CPU. /etc/slurm/slurm.conf is written
# too (and removed by stop): the job-step plugin drops SLURM_CONF before its inner srun.
#
# Memory is enforced as on a real cluster: a job over its --mem is killed.
# The first mode that kills a probe job (srun --mem=64 of a 300 MB process)
# is kept; it is printed and written to DIR/memory_enforcement:
#   cgroup          TaskPlugin=task/cgroup + cgroup.conf ConstrainRAMSpace=yes
#                   (the kernel kills at once: OUT_OF_MEMORY, "oom-kill").
#                   Processes stay tracked by proctrack/linuxproc: with
#                   proctrack/cgroup, scancel's signals did not reach a step's
#                   processes here (a cancelled step ran on to its end).
#   overmemorykill  jobacct_gather/linux sampling every second with
#                   JobAcctGatherParams=OverMemoryKill (where cgroups are not usable)
#   none            neither killed the probe (tests that need it skip)
# SLURM_TEST_MEMORY=overmemorykill (or none) tries only that mode.
# Partitions: cpu (default) and gpu at PriorityTier 2, and "preemptible" at
# PriorityTier 1: a job there is requeued (PreemptMode=REQUEUE) when a cpu or
# gpu job needs its CPUs. cred_expire=10 lets a requeued job start again after
# ~10 s (the default is 120 s).
set -euo pipefail

cmd="${1:-}"; DIR="${2:-}"
[ -n "$cmd" ] && [ -n "$DIR" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
mkdir -p "$DIR"; DIR="$(cd "$DIR" && pwd)"
MARK="# written by speechprep scripts/slurm_test_cluster.sh"

stop() {
  # this cluster's jobs first (their steps outlive slurmd), then the daemons
  if [ -f "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null; then
    SLURM_CONF="$DIR/slurm.conf" timeout 10 scancel --user=root 2>/dev/null || true
    sleep 1
  fi
  for d in slurmd slurmctld munged; do
    if [ -f "$DIR/$d.pid" ]; then
      pid="$(cat "$DIR/$d.pid")"
      if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
      fi
      rm -f "$DIR/$d.pid"
    fi
  done
  # and its /etc/slurm files: left behind, they send every `scontrol` on the machine to
  # a controller that is gone, which answers after 9 s (the SLURM executor plugin runs
  # `scontrol show config` when Snakemake starts, whatever the executor); without
  # them it fails at once
  for f in /etc/slurm/*.conf; do
    if [ -f "$f" ] && grep -qxF "$MARK" "$f"; then rm -f "$f"; fi
  done
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

# --- packages -------------------------------------------------------------------
need=()
for p in slurm-wlm munge; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "missing Debian packages: ${need[*]} (as root: apt-get install -y ${need[*]})" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq "${need[@]}" >/dev/null
fi
[ "$(id -u)" = 0 ] || { echo "the test cluster's daemons run as root" >&2; exit 1; }
stop  # a previous run's daemons, if any
# One test cluster per machine: it writes /etc/slurm and uses fixed ports.
for d in slurmctld slurmd; do
  if pgrep -x "$d" >/dev/null; then
    echo "a $d is running already (another test cluster? stop it with its own DIR first)" >&2; exit 1
  fi
done

# --- munge ------------------------------------------------------------------------
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge; chmod 0400 /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged --force --pid-file="$DIR/munged.pid.tmp" 2>/dev/null \
  || /usr/sbin/munged --force
for _ in $(seq 50); do [ -s "$DIR/munged.pid.tmp" ] && break; sleep 0.1; done
[ -s "$DIR/munged.pid.tmp" ] && mv "$DIR/munged.pid.tmp" "$DIR/munged.pid" \
  || pgrep -x munged | head -1 > "$DIR/munged.pid"

# --- slurm.conf -----------------------------------------------------------------------
host="$(hostname -s)"
cpus="$(nproc)"
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 85 / 100 ))
mkdir -p "$DIR/state" "$DIR/spool" /etc/slurm

write_conf() {  # $1: memory enforcement (cgroup | overmemorykill | none)
  local proctrack=proctrack/linuxproc task=task/none gather=jobacct_gather/none gather_params=""
  case "$1" in
    cgroup) task=task/cgroup ;;
    overmemorykill) gather=jobacct_gather/linux; gather_params="JobAcctGatherParams=OverMemoryKill" ;;
  esac
  cat > "$DIR/slurm.conf" <<CONF
$MARK
# memory enforcement: $1
ClusterName=speechprep-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=$proctrack
TaskPlugin=$task
JobAcctGatherType=$gather
JobAcctGatherFrequency=1
$gather_params
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
MinJobAge=600
ReturnToService=2
MpiDefault=none
GresTypes=gpu
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP PriorityTier=2
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP PriorityTier=2
PartitionName=preemptible Nodes=$host MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
CONF
  cat > "$DIR/gres.conf" <<CONF
$MARK
NodeName=$host Name=gpu Count=1 File=/dev/null
CONF
  local files=(slurm.conf gres.conf)
  if [ "$1" = cgroup ]; then
    # next to slurm.conf; CgroupPlugin left to autodetect (cgroup/v2 fails on a hybrid mount)
    cat > "$DIR/cgroup.conf" <<CONF
$MARK
ConstrainRAMSpace=yes
CONF
    files+=(cgroup.conf)
  else
    rm -f "$DIR/cgroup.conf"
    if [ -e /etc/slurm/cgroup.conf ] && grep -q "$MARK" /etc/slurm/cgroup.conf; then
      rm -f /etc/slurm/cgroup.conf
    fi
  fi
  for f in "${files[@]}"; do
    if [ -e "/etc/slurm/$f" ] && ! grep -q "$MARK" "/etc/slurm/$f"; then
      echo "/etc/slurm/$f exists and is not ours: not overwriting a real cluster's config" >&2; exit 1
    fi
    cp "$DIR/$f" "/etc/slurm/$f"
  done
}
export SLURM_CONF="$DIR/slurm.conf"

# --- daemons --------------------------------------------------------------------------
up() {  # start slurmctld + slurmd (a fresh state), wait for the node to be idle
  rm -rf "${DIR:?}/state" && mkdir -p "$DIR/state"
  /usr/sbin/slurmctld -c
  /usr/sbin/slurmd -N "$host"
  for _ in $(seq 100); do
    [ "$(sinfo -h -N -o '%t' 2>/dev/null | head -1 || true)" = idle ] && return 0
    sleep 0.2
  done
  echo "test SLURM did not come up; see $DIR/slurmctld.log and $DIR/slurmd.log" >&2
  sinfo -N >&2 || true
  return 1
}

down() {  # stop slurmd + slurmctld (munged stays up)
  local d pid
  for d in slurmd slurmctld; do
    [ -f "$DIR/$d.pid" ] || continue
    pid="$(cat "$DIR/$d.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$DIR/$d.pid"
  done
}

probe() {  # is a job over its --mem killed? (a 300 MB process under --mem=64)
  local out rc=0
  out="$(timeout 60 srun -p cpu -N1 -n1 --mem=64 -t 1 -J memprobe \
    perl -e '$x = "x" x (300 * 1024 * 1024); sleep 4; print "survived\n"' 2>&1)" || rc=$?
  printf '%s\n(exit %s)\n' "$out" "$rc" > "$DIR/memory_probe.$1.log"
  [ "$rc" != 0 ] && grep -qiE "out of memory|oom-kill|exceeded .*memory limit" <<<"$out"
}

mode=none
for try in ${SLURM_TEST_MEMORY:-cgroup overmemorykill}; do  # (SLURM_TEST_MEMORY: the modes to try)
  write_conf "$try"
  if up && probe "$try"; then mode="$try"; break; fi
  echo "memory enforcement: $try did not kill a job over its --mem (see $DIR/memory_probe.$try.log)" >&2
  down
done
if [ "$mode" = none ]; then
  write_conf none
  up || { stop; exit 1; }
  echo "memory enforcement: none (neither cgroup nor OverMemoryKill killed a job over its --mem)" >&2
fi
: > "$DIR/jobcomp.txt"   # the probe's record is not a test's
echo "$mode" > "$DIR/memory_enforcement"
echo "test SLURM up: node $host ($cpus CPUs, $mem_mb MB, gpu:1 gres), partitions cpu (default), gpu, preemptible; memory enforcement: $mode; state in $DIR"
