package ethtoolname

import "testing"

func TestParseQueue(t *testing.T) {
	for _, tc := range []struct {
		name, base, queue string
		ok                bool
	}{
		// mlx5
		{"rx3_xdp_drop", "rx_xdp_drop", "3", true},
		{"tx0_xdp_xmit", "tx_xdp_xmit", "0", true},
		{"ch2_poll", "ch_poll", "2", true},
		{"rx12_cache_reuse", "rx_cache_reuse", "12", true},
		{"rx_xdp_drop", "", "", false},
		{"ch_poll", "", "", false},
		{"rx_64_bytes_phy", "", "", false},
		{"rx_65_to_127_bytes_phy", "", "", false},
		// veth, virtio_net, ixgbe, ice
		{"rx_queue_0_xdp_packets", "rx_xdp_packets", "0", true},
		{"tx_queue_1_xdp_xmit_errors", "tx_xdp_xmit_errors", "1", true},
		{"rx_queue_0_packets", "rx_packets", "0", true},
		{"tx_queue_63_bp_cleaned", "tx_bp_cleaned", "63", true},
		// i40e, iavf
		{"rx-0.packets", "rx_packets", "0", true},
		{"tx-3.bytes", "tx_bytes", "3", true},
		{"port.rx_bytes", "", "", false},
		{"veb.tc_0_tx_packets", "", "", false},
		// bnxt
		{"[0]: rx_ucast_packets", "rx_ucast_packets", "0", true},
		{"[15]: tpa_aborts", "tpa_aborts", "15", true},
		{"[x]: rx", "", "", false},
		{"[weird]", "", "", false},
		// ena
		{"queue_0_rx_cnt", "rx_cnt", "0", true},
		{"queue_7_tx_bytes", "tx_bytes", "7", true},
		// gve
		{"rx_no_buffers_posted[0]", "rx_no_buffers_posted", "0", true},
		{"tx_xdp_xmit_errors[11]", "tx_xdp_xmit_errors", "11", true},
		{"[3]", "", "", false},
		{"rx_posted_desc[]", "", "", false},
		{"rx_posted_desc[01]", "", "", false},
		// not queues
		{"peer_ifindex", "", "", false},
		{"tx_queue_01_bytes", "", "", false}, // leading zero
		{"rx_queue_0_", "", "", false},
		{"rx0", "", "", false},
		{"rx-0.", "", "", false},
		{"", "", "", false},
	} {
		base, q, ok := ParseQueue(tc.name)
		if base != tc.base || q != tc.queue || ok != tc.ok {
			t.Errorf("ParseQueue(%q) = %q, %q, %v; want %q, %q, %v", tc.name, base, q, ok, tc.base, tc.queue, tc.ok)
		}
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"rx_packets":      "rx_packets",
		"port.rx_bytes":   "port_rx_bytes",
		"RX Bytes":        "rx_bytes",
		"rx pkts (good)":  "rx_pkts_good",
		"1st_stat":        "1st_stat",
		"[weird]":         "weird",
		"rx__x--y":        "rx_x_y",
		"...":             "",
		"rx_size_64.nic":  "rx_size_64_nic",
		"tx-0.packets":    "tx_0_packets",
		"_leading_trail_": "leading_trail",
	} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPhyRxSize(t *testing.T) {
	for in, want := range map[string]string{
		"rx_64_bytes_phy":           "64",
		"rx_65_to_127_bytes_phy":    "65_to_127",
		"rx_1519_to_2047_bytes_phy": "1519_to_2047",
		"rx_bytes_phy":              "",
		"rx_oversize_pkts_phy":      "",
		"rx_64_to_bytes_phy":        "",
	} {
		got, ok := PhyRxSize(in)
		if got != want || ok != (want != "") {
			t.Errorf("PhyRxSize(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
