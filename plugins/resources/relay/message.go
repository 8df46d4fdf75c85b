package main

import (
	"bytes"
	"errors"
	"net/mail"
	"strings"
)

// checkSenders says why msg (a message as submitted, header and body) does not come
// from the address from alone: it needs exactly one From header naming exactly from,
// and any Sender or Return-Path header names from too. Envelope and header together
// are what a recipient sees, so an account that may use one address uses it in both.
// The error never repeats an address of the message.
func checkSenders(msg []byte, from string) error {
	m, err := mail.ReadMessage(bytes.NewReader(msg))
	if err != nil {
		return errors.New("the message's header cannot be read (RFC 5322)")
	}
	froms := m.Header["From"]
	if len(froms) != 1 {
		return errors.New("the message needs exactly one From header")
	}
	list, err := mail.ParseAddressList(froms[0])
	if err != nil || len(list) != 1 {
		return errors.New("the From header must hold one address")
	}
	if !strings.EqualFold(list[0].Address, from) {
		return errors.New("the From header is not the account's address")
	}
	for _, s := range m.Header["Sender"] {
		a, err := mail.ParseAddress(s)
		if err != nil || !strings.EqualFold(a.Address, from) {
			return errors.New("the Sender header is not the account's address")
		}
	}
	for _, r := range m.Header["Return-Path"] {
		if !strings.EqualFold(strings.Trim(strings.TrimSpace(r), "<>"), from) {
			return errors.New("the Return-Path header is not the account's address")
		}
	}
	return nil
}
