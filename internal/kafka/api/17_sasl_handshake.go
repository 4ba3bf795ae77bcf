package api

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
)

// saslHandshake answers SaslHandshake (key 17): it chooses the mechanism of the exchange that the
// following SaslAuthenticate requests carry (KIP-152). On a listener without SASL it gets
// ILLEGAL_SASL_STATE, as in Kafka. On a SASL listener, version 0 (whose tokens would travel outside
// Kafka requests) gets UNSUPPORTED_VERSION, a handshake in the middle of an exchange
// ILLEGAL_SASL_STATE and a mechanism not offered UNSUPPORTED_SASL_MECHANISM, each closing the
// connection after the answer. An authenticated connection may hand-shake again to re-authenticate
// (KIP-368).
func (b *Broker) saslHandshake(req *wire.Request, body *kmsg.SASLHandshakeRequest) wire.Reply {
	resp := body.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = b.sasl.mechanisms
	s := req.Session
	switch {
	case s == nil || !s.Protocol.SASL():
		// s is nil for a request not from a wire connection (a test driving Handle).
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case body.Version == 0:
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		s.CloseAfterReply()
	case s.SASL != nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		s.CloseAfterReply()
	case !b.sasl.offers(body.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		s.CloseAfterReply()
	default:
		s.SASL = &saslState{mechanism: body.Mechanism}
	}
	return ready(resp)
}
