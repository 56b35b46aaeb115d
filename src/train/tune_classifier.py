"""tune's classifier head with hidden layers, on Hugging Face's encoders.

`tune --save-best` writes this file beside a model whose head has hidden layers
(classifier_layers > 0), which Hugging Face's *ForSequenceClassification classes lack.
config.json's "auto_map" names the class here for the model's family, so that

    AutoModelForSequenceClassification.from_pretrained(DIR, trust_remote_code=True)

builds the family's own encoder and pooler with tune's head and loads every tensor of
model.safetensors. Without trust_remote_code, transformers builds its own class, whose head has
no hidden layers: it warns that the head's tensors are unused and its classifier newly
initialised.

The head, as tune trains it (config.json's "tune_classifier_head": hidden_sizes, activation,
dropout): dropout on the pooled first token, then each hidden layer (`hidden.N`: Linear, the
activation, dropout), then the output layer `out`. The pooler is the family's: BERT's
(bert.pooler.dense, tanh), RoBERTa's (classifier.dense, tanh), DeBERTa's ContextPooler
(pooler.dense, gelu).
"""
import torch
from torch import nn
from transformers.models.bert.modeling_bert import BertForSequenceClassification
from transformers.models.camembert.modeling_camembert import CamembertForSequenceClassification
from transformers.models.deberta_v2.modeling_deberta_v2 import DebertaV2ForSequenceClassification
from transformers.models.roberta.modeling_roberta import RobertaForSequenceClassification
from transformers.models.xlm_roberta.modeling_xlm_roberta import (
    XLMRobertaForSequenceClassification)

ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "tanh": nn.Tanh}


class TuneClassifierHead(nn.Module):
    """Dropout, the hidden layers (each: Linear, activation, dropout), the output layer. With
    `roberta_pooler`, RoBERTa's pooler first: `dense` and tanh on the first token."""

    def __init__(self, config, in_features, roberta_pooler=False):
        super().__init__()
        spec = config.tune_classifier_head
        self.roberta_pooler = roberta_pooler
        if roberta_pooler:
            self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(float(spec["dropout"]))
        self.activation = ACTIVATIONS[spec["activation"]]()
        self.hidden = nn.ModuleList()
        width = in_features
        for size in spec["hidden_sizes"]:
            self.hidden.append(nn.Linear(width, int(size)))
            width = int(size)
        self.out = nn.Linear(width, config.num_labels)

    def forward(self, x, **kwargs):
        if self.roberta_pooler:
            x = torch.tanh(self.dense(x[:, 0, :]))
        x = self.dropout(x)
        for layer in self.hidden:
            x = self.dropout(self.activation(layer(x)))
        return self.out(x)


class TuneBertForSequenceClassification(BertForSequenceClassification):
    def __init__(self, config):
        super().__init__(config)
        self.dropout = nn.Identity()  # the head drops out itself
        self.classifier = TuneClassifierHead(config, config.hidden_size)
        self.post_init()


class TuneDebertaV2ForSequenceClassification(DebertaV2ForSequenceClassification):
    def __init__(self, config):
        super().__init__(config)
        self.dropout = nn.Identity()
        self.classifier = TuneClassifierHead(config, self.pooler.output_dim)
        self.post_init()


class TuneRobertaForSequenceClassification(RobertaForSequenceClassification):
    def __init__(self, config):
        super().__init__(config)
        self.classifier = TuneClassifierHead(config, config.hidden_size, roberta_pooler=True)
        self.post_init()


class TuneXLMRobertaForSequenceClassification(XLMRobertaForSequenceClassification):
    def __init__(self, config):
        super().__init__(config)
        self.classifier = TuneClassifierHead(config, config.hidden_size, roberta_pooler=True)
        self.post_init()


class TuneCamembertForSequenceClassification(CamembertForSequenceClassification):
    def __init__(self, config):
        super().__init__(config)
        self.classifier = TuneClassifierHead(config, config.hidden_size, roberta_pooler=True)
        self.post_init()
