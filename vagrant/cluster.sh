#!/usr/bin/env bash
# Joins this VM to the cluster of the Vagrantfile's MRC_VMS profile (run as root by Vagrant, after
# vagrant/provision.sh): root's client key and the known-hosts file of every VM, so that root on any
# VM reaches root on every other over ssh with keys made for them; this VM's own host key, so that
# the known-hosts file made before the VMs booted holds. The files come from the Vagrantfile's file
# provisioners in /tmp/mrc-cluster/. Nothing else of sshd's configuration changes.
set -euo pipefail

FROM="${MRC_CLUSTER_FILES:-/tmp/mrc-cluster}"
SSH_DIR=/root/.ssh

die() { printf 'cluster.sh: error: %s\n' "$*" >&2; exit 1; }

for name in id_ed25519 id_ed25519.pub known_hosts host_ed25519 host_ed25519.pub; do
    [ -s "$FROM/$name" ] || die "$FROM/$name is missing: run it through the Vagrantfile (MRC_VMS=N vagrant up)"
done

install -d -m 700 "$SSH_DIR"
install -m 600 "$FROM/id_ed25519" "$SSH_DIR/mrc_cluster_ed25519"
install -m 644 "$FROM/id_ed25519.pub" "$SSH_DIR/mrc_cluster_ed25519.pub"
install -m 644 "$FROM/known_hosts" "$SSH_DIR/mrc_cluster_known_hosts"
touch "$SSH_DIR/authorized_keys"
chmod 600 "$SSH_DIR/authorized_keys"
grep -qxF "$(cat "$FROM/id_ed25519.pub")" "$SSH_DIR/authorized_keys" || cat "$FROM/id_ed25519.pub" >> "$SSH_DIR/authorized_keys"

install -m 600 "$FROM/host_ed25519" /etc/ssh/ssh_host_ed25519_key
install -m 644 "$FROM/host_ed25519.pub" /etc/ssh/ssh_host_ed25519_key.pub
systemctl reload ssh 2>/dev/null || systemctl restart ssh
rm -rf "$FROM"
echo "cluster.sh: root's cluster key and the known hosts of every VM installed; cluster file: /vagrant/vagrant/cluster.yaml"
