package api

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
)

// saslHandshake answers SaslHandshake (key 17): it chooses the mechanism of the exchange that the
// following SaslAuthenticate requests carry (KIP-152), or, after version 0, the bare tokens that
// follow it (KIP-43, as kafka-python 2.0 sends them; the wire turns each into a SaslAuthenticate
// v0). On a listener without SASL it gets ILLEGAL_SASL_STATE, as in Kafka. On a SASL listener, a
// handshake in the middle of an exchange gets ILLEGAL_SASL_STATE and a mechanism not offered
// UNSUPPORTED_SASL_MECHANISM, each closing the connection after the answer. An authenticated
// connection may hand-shake again to re-authenticate (KIP-368).
func (b *Broker) saslHandshake(req *wire.Request, body *kmsg.SASLHandshakeRequest) wire.Reply {
	resp := body.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = b.sasl.mechanisms
	s := req.Session
	switch {
	case s == nil || !s.Protocol.SASL():
		// s is nil for a request not from a wire connection (a test driving Handle).
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case s.SASL != nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		s.CloseAfterReply()
	case !b.sasl.offers(body.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		s.CloseAfterReply()
	default:
		s.SASL = &saslState{mechanism: body.Mechanism}
		if body.Version == 0 {
			s.ExpectRawTokens()
		}
	}
	return ready(resp)
}
