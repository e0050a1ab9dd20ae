package cluster

import (
	"google.golang.org/grpc/credentials"
)

// PeerCredentials returns the per-RPC credentials a node named name
// presents to its peers, derived from the cluster key. Operators' tools use
// it to speak the peer protocol on a node's behalf; anyone holding the key
// can, which is why the key file is the cluster's root secret.
func PeerCredentials(clusterKey []byte, name string) (credentials.PerRPCCredentials, error) {
	k, err := deriveKeys(clusterKey)
	if err != nil {
		return nil, err
	}
	return peerCreds{name: name, cred: credential(k.peer, name)}, nil
}
