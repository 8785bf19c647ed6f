package jetstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConsumerOwnerJSON: an owner of the global account is written as the
// bare user name versions before accounts wrote and read, any other as an
// object; each reads back as written.
func TestConsumerOwnerJSON(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owner consumerOwner
		json  string
	}{
		{"global account", consumerOwner{User: "alice", Account: "$G"}, `"alice"`},
		{"global account, no user", consumerOwner{Account: "$G"}, `""`},
		{"configured account", consumerOwner{User: "bob", Account: "ORDERS"}, `{"user":"bob","account":"ORDERS"}`},
		{"configured account, no user", consumerOwner{Account: "ORDERS"}, `{"account":"ORDERS"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.owner)
			require.NoError(t, err)
			require.JSONEq(t, tc.json, string(b))
			var got consumerOwner
			require.NoError(t, json.Unmarshal(b, &got))
			require.Equal(t, tc.owner, got)
		})
	}
	var o consumerOwner
	require.Error(t, json.Unmarshal([]byte(`7`), &o), "neither a name nor an owner")
}
