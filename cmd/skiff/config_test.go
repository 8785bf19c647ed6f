package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/conf"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

func TestExampleConfig(t *testing.T) {
	m, err := conf.ParseFile("../../docs/skiff.conf")
	require.NoError(t, err)
	cfg := defaultBrokerConfig()
	opts := &cfg.server
	var warnings []string
	require.NoError(t, applyConfig(m, &cfg, func(f string, a ...any) { warnings = append(warnings, f) }))
	require.Empty(t, warnings)
	require.True(t, cfg.streams)
	require.Equal(t, "./skiff-data", cfg.jetstream.StoreDir)
	require.Equal(t, "127.0.0.1", opts.Host)
	require.Equal(t, 4222, opts.Port)
	require.Equal(t, 8222, opts.HTTPPort)
	require.Equal(t, "skiff-example", opts.ServerName)
	require.Equal(t, 1<<20, opts.MaxPayload)
	require.Equal(t, 4096, opts.MaxControlLine)
	require.Equal(t, 10000, opts.MaxConnections)
	require.Equal(t, 100000, opts.MaxSubscriptions)
	require.Equal(t, 64<<20, opts.MaxPending)
	require.Equal(t, 10*time.Second, opts.WriteDeadline)
	require.Equal(t, 2*time.Minute, opts.PingInterval)
	require.Equal(t, 2, opts.MaxPingsOut)
	require.Equal(t, 2*time.Second, opts.AuthTimeout)
	require.Len(t, opts.Users, 2)
	alice := opts.Users[0]
	require.Equal(t, "alice", alice.Name)
	require.Equal(t, []string{"orders.>", "_INBOX.>"}, alice.Permissions.Publish.Allow)
	require.Equal(t, []string{"orders.secret"}, alice.Permissions.Publish.Deny)
	require.Equal(t, []string{"orders.#", "_INBOX.>"}, alice.Permissions.Subscribe.Allow)
	require.Nil(t, opts.Users[1].Permissions)
	// The result is valid for the server.
	opts.Port, opts.HTTPPort = server.RandomPort, 0
	_, err = server.New(*opts)
	require.NoError(t, err)
}

func TestConfigErrors(t *testing.T) {
	tests := map[string]string{
		"bad size":           "max_payload: lots",
		"bad duration":       "ping_interval: soon",
		"unknown auth key":   "authorization { colour: red }",
		"users not a list":   "authorization { users: 3 }",
		"bad permission key": "authorization { users: [{user: a, permissions: {publish: {maybe: [x]}}}] }",
		"tls without files":  "tls { verify: true }",
		"bad listen":         "listen: nonsense",
		"bad jetstream":      "jetstream: maybe",
		"bad store_dir":      "jetstream { store_dir: [a] }",
	}
	for name, text := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := conf.Parse([]byte(text))
			require.NoError(t, err)
			cfg := defaultBrokerConfig()
			require.Error(t, applyConfig(m, &cfg, func(string, ...any) {}))
		})
	}
}

func TestConfigUnknownKeysWarn(t *testing.T) {
	m, err := conf.Parse([]byte("port: 5000\ncluster { port: 6222 }\nlisten: 127.0.0.2:4333\n"))
	require.NoError(t, err)
	cfg := defaultBrokerConfig()
	opts := &cfg.server
	var warnings []string
	require.NoError(t, applyConfig(m, &cfg, func(f string, a ...any) { warnings = append(warnings, f) }))
	require.Len(t, warnings, 1)
	require.Equal(t, "127.0.0.2", opts.Host)
	require.Equal(t, 4333, opts.Port)
}

func TestConfigJetStream(t *testing.T) {
	tests := []struct {
		text    string
		streams bool
		dir     string
	}{
		{"", true, ""},
		{"jetstream: disabled", false, ""},
		{"jetstream: enabled", true, ""},
		{"jetstream: false", false, ""},
		{"jetstream { store_dir: /var/lib/skiff }", true, "/var/lib/skiff"},
		{"jetstream { store_dir: data, enabled: false }", false, "data"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			m, err := conf.Parse([]byte(tt.text))
			require.NoError(t, err)
			cfg := defaultBrokerConfig()
			require.NoError(t, applyConfig(m, &cfg, func(string, ...any) {}))
			require.Equal(t, tt.streams, cfg.streams)
			require.Equal(t, tt.dir, cfg.jetstream.StoreDir)
		})
	}
}

func TestConfigSync(t *testing.T) {
	tests := []struct {
		text     string
		policy   jetstream.SyncPolicy
		interval time.Duration
		err      bool
	}{
		{"jetstream { sync_interval: always }", jetstream.SyncAlways, 0, false},
		{"jetstream { sync: never }", jetstream.SyncNever, 0, false},
		{"jetstream { sync_interval: 2s }", jetstream.SyncInterval, 2 * time.Second, false},
		{"jetstream { sync_interval: \"10ms\" }", jetstream.SyncInterval, 10 * time.Millisecond, false},
		{"jetstream { sync_interval: sometimes }", 0, 0, true},
		{"jetstream { sync_interval: 0s }", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			m, err := conf.Parse([]byte(tt.text))
			require.NoError(t, err)
			cfg := defaultBrokerConfig()
			err = applyConfig(m, &cfg, func(string, ...any) {})
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.policy, cfg.jetstream.Sync)
			require.Equal(t, tt.interval, cfg.jetstream.SyncInterval)
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	cfg := defaultBrokerConfig()
	err := loadConfig(filepath.Join(t.TempDir(), "nope.conf"), &cfg)
	require.ErrorIs(t, err, os.ErrNotExist)
}
