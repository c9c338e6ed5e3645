#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for testing profiles/slurm against a real scheduler.
#
#   tests/slurm/cluster.sh install          # apt-get slurm-wlm + munge if missing (needs root)
#   tests/slurm/cluster.sh start DIR        # munged + slurmctld + slurmd, state and logs under DIR
#   tests/slurm/cluster.sh env DIR          # prints the exports clients need (SLURM_CONF)
#   tests/slurm/cluster.sh stop DIR         # stops exactly the daemons started for DIR (pid files)
#
# Two partitions named as in profiles/slurm: "cpu" (default) and "gpu". The node declares one
# count-only GPU (gres.conf without device files): sbatch --gpus=1 is accepted and routed, but no
# device exists, so this checks routing and requests, not GPU execution.
# Memory is enforced without cgroups (containers rarely delegate them): jobacct_gather/linux
# samples every second and OverMemoryKill kills a step above its --mem, so the job ends
# OUT_OF_MEMORY as it would under cgroup enforcement. Accounting: slurmdbd on a private MariaDB
# instance (sacct needs slurmdbd; the Snakemake plugin polls job states with sacct).
# Daemons listen on non-default ports so that a site's own slurm on the machine is not disturbed.
set -euo pipefail

cmd=${1:?usage: cluster.sh install|start|env|stop [DIR]}
dir=${2:-/tmp/crucible-slurm}
ctld_port=${CRUCIBLE_SLURMCTLD_PORT:-16817}
slurmd_port=${CRUCIBLE_SLURMD_PORT:-16818}
dbd_port=${CRUCIBLE_SLURMDBD_PORT:-16819}
db_port=${CRUCIBLE_SLURM_DB_PORT:-16306}

case "$cmd" in
install)
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null && command -v sacct >/dev/null \
        && command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null; then
        exit 0
    fi
    [ "$(id -u)" = 0 ] || { echo "cannot install slurm-wlm/munge: not root" >&2; exit 3; }
    command -v apt-get >/dev/null || { echo "cannot install slurm-wlm/munge: no apt-get" >&2; exit 3; }
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurm-wlm slurmdbd munge mariadb-server >/dev/null
    ;;
start)
    [ "$(id -u)" = 0 ] || { echo "slurmd must run as root here (single-node test cluster)" >&2; exit 3; }
    mkdir -p "$dir"/{state,spool/$(hostname -s),log,run}
    dir=$(cd "$dir" && pwd)
    host=$(hostname -s)
    cpus=$(nproc)
    # Declare more CPUs and memory than a CI runner has, so that the real rules' requests
    # (4 CPUs per GPU, 8 GB for a GPU job, and a group job of up to the profile's `cores: 16`) fit;
    # nothing is pinned or reserved.
    [ "$cpus" -ge 16 ] || cpus=16
    mem=${CRUCIBLE_SLURM_MEM_MB:-32000}
    if [ ! -f "$dir/munge.key" ]; then
        dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
        chmod 0400 "$dir/munge.key"
    fi
    # Accounting database: a private MariaDB on 127.0.0.1, only for this cluster.
    if [ ! -d "$dir/mysql/mysql" ]; then
        mariadb-install-db --datadir="$dir/mysql" --user=root --auth-root-authentication-method=socket \
            >"$dir/log/mariadb-install.log" 2>&1
    fi
    setsid mariadbd --datadir="$dir/mysql" --user=root --socket="$dir/run/mysql.sock" \
        --port="$db_port" --bind-address=127.0.0.1 --pid-file="$dir/run/mariadbd.pid" \
        --log-error="$dir/log/mariadbd.log" </dev/null >/dev/null 2>&1 &
    for _ in $(seq 1 60); do
        mariadb --socket="$dir/run/mysql.sock" -e 'select 1' >/dev/null 2>&1 && break
        sleep 0.5
    done
    mariadb --socket="$dir/run/mysql.sock" -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'crucible';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
    munged --force --num-threads=10 --key-file="$dir/munge.key" --socket="$dir/run/munge.sock" \
        --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/run/munge.seed"
    cat >"$dir/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$dir/run/munge.sock
DbdHost=localhost
DbdPort=$dbd_port
SlurmUser=root
PidFile=$dir/run/slurmdbd.pid
LogFile=$dir/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=crucible
StorageLoc=slurm_acct_db
EOF
    chmod 0600 "$dir/slurmdbd.conf"
    cat >"$dir/slurm.conf" <<EOF
ClusterName=crucibletest
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/run/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
# For slurmdbd this names the munge socket of the accounting connection (AuthInfo does not).
AccountingStoragePass=$dir/run/munge.sock
JobCompType=jobcomp/none
AccountingStoreFlags=job_comment
# Record GPU allocations in sacct's AllocTRES (only cpu, mem, node, billing by default).
AccountingStorageTRES=gres/gpu
MinJobAge=3600
MaxJobCount=10000
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
GresTypes=gpu
NodeName=$host CPUs=$cpus RealMemory=$mem Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host Default=NO MaxTime=INFINITE State=UP
EOF
    cat >"$dir/gres.conf" <<EOF
NodeName=$host Name=gpu Count=1 File=/dev/null
EOF
    SLURM_CONF="$dir/slurm.conf" slurmdbd
    for _ in $(seq 1 30); do
        SLURM_CONF="$dir/slurm.conf" timeout 5 sacctmgr -n list cluster >/dev/null 2>&1 && break
        sleep 0.5
    done
    # A site registers its cluster, accounts and users; the plugin guesses the account from them.
    SLURM_CONF="$dir/slurm.conf" timeout 10 sacctmgr -i add cluster crucibletest >/dev/null || true
    SLURM_CONF="$dir/slurm.conf" timeout 10 sacctmgr -i add account crucible Cluster=crucibletest >/dev/null || true
    SLURM_CONF="$dir/slurm.conf" timeout 10 sacctmgr -i add user "$(id -un)" Account=crucible Cluster=crucibletest >/dev/null || true
    # snakemake-executor-plugin-slurm-jobstep strips SLURM_CONF (all SLURM_* but a few) from the
    # environment of the srun it starts inside each job, so srun reads the default path: point it
    # at this cluster, unless a real site configuration is there (then refuse, do not touch it).
    # A test run killed before `stop` leaves its link behind, pointing into its own directory: a
    # link into another crucible test cluster whose controller is not running is ours, not a
    # site's, and is replaced (a live test cluster's link is left alone).
    if [ -L /etc/slurm/slurm.conf ] && ! pgrep -x slurmctld >/dev/null \
        && case "$(readlink /etc/slurm/slurm.conf)" in */crucible-slurm-*/cluster/slurm.conf) true ;; *) false ;; esac; then
        echo "replacing the dangling link of a killed test run: /etc/slurm/slurm.conf -> $(readlink /etc/slurm/slurm.conf)" >&2
        rm -f /etc/slurm/slurm.conf
    fi
    if [ -L /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$dir/slurm.conf" ]; then
        :
    elif [ -e /etc/slurm/slurm.conf ] || [ -L /etc/slurm/slurm.conf ]; then
        echo "/etc/slurm/slurm.conf exists (a site configuration?): not starting a test cluster over it" >&2
        exit 3
    else
        mkdir -p /etc/slurm
        ln -s "$dir/slurm.conf" /etc/slurm/slurm.conf
    fi
    # A stale state directory from an earlier run could hold jobs; start clean (-c).
    SLURM_CONF="$dir/slurm.conf" slurmctld -c -f "$dir/slurm.conf"
    SLURM_CONF="$dir/slurm.conf" slurmd -f "$dir/slurm.conf"
    for _ in $(seq 1 30); do
        if SLURM_CONF="$dir/slurm.conf" sinfo -h -N -o '%T' 2>/dev/null | grep -q -E '^(idle|mixed|allocated)'; then
            SLURM_CONF="$dir/slurm.conf" sinfo
            exit 0
        fi
        sleep 1
    done
    echo "slurm did not come up; logs follow" >&2
    tail -n 30 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    exit 4
    ;;
env)
    echo "export SLURM_CONF=$(cd "$dir" && pwd)/slurm.conf"
    ;;
stop)
    if [ -L /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$(cd "$dir" && pwd)/slurm.conf" ]; then
        rm -f /etc/slurm/slurm.conf
    fi
    for name in slurmd slurmctld slurmdbd mariadbd munged; do
        pidfile="$dir/run/$name.pid"
        if [ -f "$pidfile" ]; then
            pid=$(cat "$pidfile")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            rm -f "$pidfile"
        fi
    done
    ;;
*)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
